package admin

import (
	"testing"
)

// modelLimitsScenario covers model_limits on keys: create, read, PATCH,
// clear, and the shapes refused.
func modelLimitsScenario(e *env) {
	e.run([]step{
		{name: "project", method: "POST", path: "/admin/projects", body: `{"name":"ml"}`, status: 201},
		{name: "create with model limits", method: "POST", path: "/admin/keys",
			body: `{"project":"ml","model_limits":{"chat":{"rpm":3},"embed":{"rpm":1,"tpm":500}}}`, status: 201,
			save: map[string]string{"mlkey": "id"}, check: func(t *testing.T, b map[string]any) {
				ml, _ := b["model_limits"].(map[string]any)
				chat, _ := ml["chat"].(map[string]any)
				embed, _ := ml["embed"].(map[string]any)
				if chat["rpm"] != 3.0 || chat["tpm"] != 0.0 || embed["tpm"] != 500.0 {
					t.Errorf("model_limits = %v", ml)
				}
			}},
		{name: "get shows them", method: "GET", path: "/admin/keys/{mlkey}", status: 200, wantField: "model_limits"},
		{name: "patch replaces them", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"model_limits":{"chat":{"tpm":9}}}`,
			status: 200, check: func(t *testing.T, b map[string]any) {
				ml, _ := b["model_limits"].(map[string]any)
				if len(ml) != 1 || ml["chat"].(map[string]any)["tpm"] != 9.0 {
					t.Errorf("model_limits = %v", ml)
				}
			}},
		{name: "patch null clears", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"model_limits":null}`, status: 200, wantFieldNone: "model_limits"},
		{name: "negative", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"model_limits":{"chat":{"rpm":-1}}}`,
			status: 400, param: "model_limits", msg: "negative"},
		{name: "unknown member", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"model_limits":{"chat":{"rps":1}}}`,
			status: 400, param: "model_limits", msg: `unknown field "rps"`},
		{name: "not an object", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"model_limits":["chat"]}`,
			status: 400, param: "model_limits", msg: "not an array"},
		{name: "limits not an object", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"model_limits":{"chat":3}}`,
			status: 400, param: "model_limits", msg: `"chat"`},
		{name: "blank model", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"model_limits":{" ":{"rpm":1}}}`,
			status: 400, param: "model_limits"},
		{name: "fraction", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"model_limits":{"chat":{"rpm":1.5}}}`,
			status: 400, param: "model_limits"},
		{name: "unserved model", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"model_limits":{"chat":{"rpm":1},"gpt-4":{"rpm":1}}}`,
			status: 400, param: "model_limits", code: "unknown_model", msg: `no model "gpt-4"`},
		{name: "unserved model on create", method: "POST", path: "/admin/keys", body: `{"project":"ml","model_limits":{"chta":{"rpm":1}}}`,
			status: 400, param: "model_limits", code: "unknown_model", msg: `"chta"`},
		{name: "unserved model in the allow-list", method: "PATCH", path: "/admin/keys/{mlkey}", body: `{"models":["chat","gpt4o"]}`,
			status: 400, param: "models", code: "unknown_model", msg: `"gpt4o"`},
		{name: "unserved model in a project's allow-list", method: "POST", path: "/admin/projects", body: `{"name":"ml2","models":["nope"]}`,
			status: 400, param: "models", code: "unknown_model"},
		{name: "other members pass while the limits name a model no longer served", method: "PATCH", path: "/admin/keys/{mlkey}",
			body: `{"name":"renamed"}`, status: 200},
	})
}

// pricesScenario covers /admin/prices.
func pricesScenario(e *env) {
	listModels := func(want ...string) func(t *testing.T, b map[string]any) {
		return func(t *testing.T, b map[string]any) {
			t.Helper()
			var got []string
			for _, d := range b["data"].([]any) {
				m := d.(map[string]any)
				got = append(got, m["model"].(string)+"="+m["source"].(string))
			}
			if len(got) != len(want) {
				t.Errorf("prices = %v, want %v", got, want)
				return
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("prices = %v, want %v", got, want)
					return
				}
			}
		}
	}
	before := e.priceChanges.Load()
	e.run([]step{
		{name: "config overrides only", method: "GET", path: "/admin/prices", status: 200, check: listModels("cfg-model=config", "shadowed=config")},
		{name: "set", method: "PUT", path: "/admin/prices/gpt-4o", body: `{"input":2.5,"output":10}`, status: 200,
			check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "cached_input", 2.5) // 0 means the input price
				wantField(t, b, "source", "store")
			}},
		{name: "replace", method: "PUT", path: "/admin/prices/gpt-4o", body: `{"input":3,"cached_input":1,"output":12}`, status: 200,
			check: func(t *testing.T, b map[string]any) { wantField(t, b, "output", 12) }},
		{name: "shadow a config override", method: "PUT", path: "/admin/prices/shadowed", body: `{"input":0,"output":0}`, status: 200},
		{name: "list", method: "GET", path: "/admin/prices", status: 200,
			check: listModels("cfg-model=config", "gpt-4o=store", "shadowed=store")},
		{name: "missing output", method: "PUT", path: "/admin/prices/x", body: `{"input":1}`, status: 400, param: "output"},
		{name: "negative", method: "PUT", path: "/admin/prices/x", body: `{"input":-1,"output":1}`, status: 400, param: "input"},
		{name: "string price", method: "PUT", path: "/admin/prices/x", body: `{"input":"1","output":1}`, status: 400, param: "input"},
		{name: "unknown field", method: "PUT", path: "/admin/prices/x", body: `{"input":1,"output":1,"per":"token"}`, status: 400, param: "per"},
		{name: "first page", method: "GET", path: "/admin/prices?limit=2", status: 200,
			check: func(t *testing.T, b map[string]any) {
				listModels("cfg-model=config", "gpt-4o=store")(t, b)
				wantField(t, b, "has_more", true)
				wantField(t, b, "next_after", "gpt-4o")
			}},
		{name: "next page", method: "GET", path: "/admin/prices?limit=2&after=gpt-4o", status: 200,
			check: func(t *testing.T, b map[string]any) {
				listModels("shadowed=store")(t, b)
				wantField(t, b, "has_more", false)
			}},
		{name: "bad limit", method: "GET", path: "/admin/prices?limit=0", status: 400, param: "limit"},
		{name: "unknown query parameter", method: "GET", path: "/admin/prices?project=x", status: 400, param: "project"},
		{name: "delete", method: "DELETE", path: "/admin/prices/shadowed", status: 200},
		{name: "delete again", method: "DELETE", path: "/admin/prices/shadowed", status: 404, code: "price_not_found"},
		{name: "config override back", method: "GET", path: "/admin/prices", status: 200,
			check: listModels("cfg-model=config", "gpt-4o=store", "shadowed=config")},
		{name: "PATCH is not a method here", method: "PATCH", path: "/admin/prices/gpt-4o", body: `{}`, status: 405},
		{name: "client key", method: "PUT", path: "/admin/prices/gpt-4o", body: `{"input":1,"output":1}`, key: "Bearer " + clientSecret, status: 403},
	})
	// Four writes succeeded: set, replace, shadow and one delete.
	if got := e.priceChanges.Load() - before; got != 4 {
		e.t.Errorf("PricesChanged called %d times, want 4 (once per successful write)", got)
	}
}

// providersScenario covers providers on keys and projects: create, read,
// PATCH, clear, and names the config does not have.
func providersScenario(e *env) {
	list := func(want ...string) func(t *testing.T, b map[string]any) {
		return func(t *testing.T, b map[string]any) {
			t.Helper()
			got, _ := b["providers"].([]any)
			if len(got) != len(want) {
				t.Errorf("providers = %v, want %v", b["providers"], want)
				return
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("providers = %v, want %v", got, want)
				}
			}
		}
	}
	e.run([]step{
		{name: "project", method: "POST", path: "/admin/projects", body: `{"name":"pv","providers":["openai","local"]}`, status: 201,
			save: map[string]string{"pvproj": "id"}, check: list("openai", "local")},
		{name: "project read", method: "GET", path: "/admin/projects/{pvproj}", status: 200, check: list("openai", "local")},
		{name: "key", method: "POST", path: "/admin/keys", body: `{"project":"pv","providers":["local"]}`, status: 201,
			save: map[string]string{"pvkey": "id"}, check: list("local")},
		{name: "key read", method: "GET", path: "/admin/keys/{pvkey}", status: 200, check: list("local")},
		{name: "key patch", method: "PATCH", path: "/admin/keys/{pvkey}", body: `{"providers":["openai"]}`, status: 200, check: list("openai")},
		{name: "key patch null clears", method: "PATCH", path: "/admin/keys/{pvkey}", body: `{"providers":null}`, status: 200,
			wantFieldNone: "providers"},
		{name: "project patch empty clears", method: "PATCH", path: "/admin/projects/{pvproj}", body: `{"providers":[]}`, status: 200,
			wantFieldNone: "providers"},
		{name: "unknown provider on a key", method: "PATCH", path: "/admin/keys/{pvkey}", body: `{"providers":["openai","opneai"]}`,
			status: 400, param: "providers", code: "unknown_provider", msg: `"opneai"`},
		{name: "unknown provider on create", method: "POST", path: "/admin/keys", body: `{"project":"pv","providers":["azure"]}`,
			status: 400, param: "providers", code: "unknown_provider"},
		{name: "unknown provider on a project", method: "POST", path: "/admin/projects", body: `{"name":"pv2","providers":["x"]}`,
			status: 400, param: "providers", code: "unknown_provider"},
		{name: "not a list", method: "PATCH", path: "/admin/keys/{pvkey}", body: `{"providers":"openai"}`, status: 400, param: "providers"},
		{name: "refused change left nothing", method: "GET", path: "/admin/keys/{pvkey}", status: 200, wantFieldNone: "providers"},
	})
}

func TestProvidersSQLite(t *testing.T) { providersScenario(newEnv(t, openSQLite(t))) }

func TestProvidersPostgres(t *testing.T) { providersScenario(newEnv(t, openPostgres(t))) }

func TestModelLimitsSQLite(t *testing.T) { modelLimitsScenario(newEnv(t, openSQLite(t))) }

func TestPricesSQLite(t *testing.T) { pricesScenario(newEnv(t, openSQLite(t))) }

func TestPricesAndModelLimitsPostgres(t *testing.T) {
	e := newEnv(t, openPostgres(t))
	modelLimitsScenario(e)
	pricesScenario(e)
}
