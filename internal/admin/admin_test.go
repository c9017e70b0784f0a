package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
	"gatehouse/internal/openapitest"
	"gatehouse/internal/store/sqlite"
	"gatehouse/internal/tokens"
)

const (
	adminKey     = "admin-test-secret"
	clientSecret = "gh-a-client-key-from-the-config"
)

// env is an admin API over a real store, served on loopback.
type env struct {
	t     *testing.T
	st    auth.Store
	srv   *httptest.Server
	vars  map[string]string // placeholders {name} in paths and bodies
	logs  *bytes.Buffer
	spec  *openapitest.Spec
	calls int

	priceChanges atomic.Int32 // calls of Options.PricesChanged
}

func openSQLite(t testing.TB) auth.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "admin.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newEnv serves the admin API over st; opts change its Options.
// A fuzz target builds it with its *testing.F and sets t per input.
func newEnv(t testing.TB, st auth.Store, opts ...func(*Options)) *env {
	t.Helper()
	ids, err := EnsureProjects(context.Background(), st, []string{"config-proj", "config-proj", ""})
	if err != nil {
		t.Fatal(err)
	}
	static := []auth.Key{{ID: "static:cfg", Name: "cfg", ProjectID: ids["config-proj"], Limits: auth.Limits{RPM: 5}}}
	clients := auth.NewStatic([]auth.StaticKey{{Secret: clientSecret, Principal: auth.Principal{KeyID: "static:cfg"}}})
	logs := &bytes.Buffer{}
	e := &env{st: st, vars: map[string]string{"cfgproj": ids["config-proj"]}, logs: logs, spec: loadSpec(t)}
	e.t, _ = t.(*testing.T)
	ps, _ := st.(tokens.PriceStore)
	usage, _ := st.(account.Querier)
	o := Options{
		Usage: usage,
		Store: st, AdminKey: auth.HashKey(adminKey), Static: static, Clients: clients,
		Log:    slog.New(slog.NewTextHandler(logs, nil)),
		Prices: ps,
		ConfigPrices: map[string]tokens.StoredPrice{
			"cfg-model": {Model: "cfg-model", Input: 1, Output: 2},
			"shadowed":  {Model: "shadowed", Input: 9, Output: 9},
		},
		PricesChanged: func(context.Context) error { e.priceChanges.Add(1); return nil },
		Served:        func(m string) bool { return m == "chat" || m == "embed" || m == "gpt-4o" },
		Provider:      func(n string) bool { return n == "openai" || n == "local" },
	}
	for _, opt := range opts {
		opt(&o)
	}
	e.srv = httptest.NewServer(New(o))
	t.Cleanup(e.srv.Close)
	return e
}

var placeholder = regexp.MustCompile(`\{[a-z0-9]+\}`)

func (e *env) expand(s string) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := e.vars[m[1:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// do sends one request and checks the response against docs/openapi.yaml.
func (e *env) do(method, path, body, key, contentType string) (int, map[string]any) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(e.expand(body))
	}
	req, err := http.NewRequest(method, e.srv.URL+e.expand(path), rd)
	if err != nil {
		e.t.Fatal(err)
	}
	switch key {
	case "":
		req.Header.Set("Authorization", "Bearer "+adminKey)
	case "-":
	default:
		req.Header.Set("Authorization", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	e.calls++
	for _, problem := range e.spec.Check(method, req.URL.Path, resp.StatusCode, resp.Header, raw) {
		e.t.Errorf("openapi: %s (body %s)", problem, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		e.t.Errorf("%s %s: body is not a JSON object: %s", method, path, raw)
	}
	return resp.StatusCode, m
}

// step is one request of a scenario; steps run in order and share the
// placeholders they save.
type step struct {
	name                     string
	method, path, body       string
	key                      string // "" sends the admin key, "-" none, else the Authorization header
	contentType              string
	status                   int
	param, code, msg         string            // for errors: the param and code, and a part of the message
	save                     map[string]string // placeholder → top-level field of the response
	check                    func(t *testing.T, body map[string]any)
	wantField, wantFieldNone string // a top-level field that must be there / must not
}

func (e *env) run(steps []step) {
	for _, s := range steps {
		status, body := e.do(s.method, s.path, s.body, s.key, s.contentType)
		if status != s.status {
			e.t.Errorf("%s: %s %s = %d, want %d: %v", s.name, s.method, s.path, status, s.status, body)
			continue
		}
		if status >= 400 {
			er, _ := body["error"].(map[string]any)
			param, _ := er["param"].(string)
			code, _ := er["code"].(string)
			msg, _ := er["message"].(string)
			if param != s.param || (s.code != "" && code != s.code) || !strings.Contains(msg, s.msg) {
				e.t.Errorf("%s: error param %q code %q message %q; want param %q code %q message containing %q",
					s.name, param, code, msg, s.param, s.code, s.msg)
			}
			if s.param != "" && !strings.Contains(msg, s.param) {
				e.t.Errorf("%s: message %q does not name the field %q", s.name, msg, s.param)
			}
		}
		for name, field := range s.save {
			v, ok := body[field].(string)
			if !ok {
				e.t.Fatalf("%s: no %q to save in %v", s.name, field, body)
			}
			e.vars[name] = v
		}
		if s.wantField != "" {
			if _, ok := body[s.wantField]; !ok {
				e.t.Errorf("%s: no %q in %v", s.name, s.wantField, body)
			}
		}
		if s.wantFieldNone != "" {
			if _, ok := body[s.wantFieldNone]; ok {
				e.t.Errorf("%s: unexpected %q in %v", s.name, s.wantFieldNone, body)
			}
		}
		if s.check != nil {
			s.check(e.t, body)
		}
	}
}

func wantField(t *testing.T, body map[string]any, name string, want any) {
	t.Helper()
	got := body[name]
	if f, ok := got.(float64); ok {
		if w, ok := want.(int); ok {
			want = float64(w)
		}
		got = f
	}
	if got != want {
		t.Errorf("%s = %v, want %v (in %v)", name, got, want, body)
	}
}

func ids(body map[string]any) []string {
	var out []string
	for _, d := range body["data"].([]any) {
		out = append(out, d.(map[string]any)["id"].(string))
	}
	return out
}

func TestAuthAndRouting(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	e.run([]step{
		{name: "no key", method: "GET", path: "/admin/projects", key: "-", status: 401, code: "missing_admin_key"},
		{name: "wrong key", method: "GET", path: "/admin/projects", key: "Bearer nope", status: 401, code: "invalid_admin_key"},
		{name: "admin key, wrong scheme", method: "GET", path: "/admin/projects", key: "Basic " + adminKey, status: 401, code: "missing_admin_key"},
		{name: "admin key with a suffix", method: "GET", path: "/admin/projects", key: "Bearer " + adminKey + "x", status: 401, code: "invalid_admin_key"},
		{name: "client key", method: "GET", path: "/admin/keys", key: "Bearer " + clientSecret, status: 403, code: "insufficient_permissions"},
		{name: "client key on a write", method: "POST", path: "/admin/projects", body: `{"name":"x"}`, key: "Bearer " + clientSecret, status: 403},
		{name: "unknown path", method: "GET", path: "/admin/nope", status: 404, code: "unknown_url"},
		{name: "wrong method", method: "PUT", path: "/admin/projects", body: `{}`, status: 405, code: "method_not_allowed"},
		{name: "usage without a key", method: "GET", path: "/admin/usage", key: "-", status: 401},
	})
}

// scenario is every endpoint in turn, with bad input for each; it runs
// against SQLite here and PostgreSQL in postgres_test.go.
func scenario(e *env) {
	e.run([]step{
		// Projects.
		{name: "create project", method: "POST", path: "/admin/projects", status: 201,
			body: `{"name":"acme","rpm":100,"tpm":5000,"budget":{"usd":50,"period":"month"},"labels":{"team":"a"},"models":["gpt-4o"],"cache":false,"log_bodies":true}`,
			save: map[string]string{"p1": "id"}, check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "name", "acme")
				wantField(t, b, "rpm", 100)
				wantField(t, b, "read_only", false)
				if c, _ := b["cache"].(map[string]any); fmt.Sprint(c) != "map[exact:map[enabled:false] semantic:map[enabled:<nil>]]" {
					t.Errorf("cache %v: want false's long form {exact: {enabled: false}}", b["cache"])
				}
			}},
		{name: "duplicate project", method: "POST", path: "/admin/projects", body: `{"name":"acme"}`, status: 409, param: "name", code: "duplicate_name"},
		{name: "project without name", method: "POST", path: "/admin/projects", body: `{}`, status: 400, param: "name", code: "missing_field"},
		{name: "project unknown field", method: "POST", path: "/admin/projects", body: `{"name":"x","colour":"red"}`, status: 400, param: "colour", code: "unknown_field"},
		{name: "project name wrong type", method: "POST", path: "/admin/projects", body: `{"name":5}`, status: 400, param: "name", msg: "must be a string"},
		{name: "project negative rpm", method: "POST", path: "/admin/projects", body: `{"name":"neg","rpm":-1}`, status: 400, param: "rpm", msg: "negative"},
		{name: "project fractional tpm", method: "POST", path: "/admin/projects", body: `{"name":"frac","tpm":1.5}`, status: 400, param: "tpm"},
		{name: "project bad budget period", method: "POST", path: "/admin/projects", body: `{"name":"bp","budget":{"usd":1,"period":"year"}}`, status: 400, param: "budget", msg: "period"},
		{name: "project budget without usd", method: "POST", path: "/admin/projects", body: `{"name":"bp","budget":{"period":"day"}}`, status: 400, param: "budget", msg: "usd"},
		{name: "project negative budget", method: "POST", path: "/admin/projects", body: `{"name":"bp","budget":{"usd":-3,"period":"day"}}`, status: 400, param: "budget", msg: "negative"},
		{name: "project budget unknown member", method: "POST", path: "/admin/projects", body: `{"name":"bp","budget":{"usd":3,"period":"day","cap":1}}`, status: 400, param: "budget", msg: "cap"},
		{name: "project name with a space", method: "POST", path: "/admin/projects", body: `{"name":"has space"}`, status: 400, param: "name"},
		{name: "project name like an id", method: "POST", path: "/admin/projects", body: `{"name":"proj_x"}`, status: 400, param: "name"},
		{name: "project log_bodies wrong type", method: "POST", path: "/admin/projects", body: `{"name":"lb","log_bodies":"yes"}`, status: 400, param: "log_bodies", msg: "boolean"},
		{name: "not JSON", method: "POST", path: "/admin/projects", body: `{"name":`, status: 400, code: "invalid_json"},
		{name: "not an object", method: "POST", path: "/admin/projects", body: `["acme"]`, status: 400, code: "invalid_body"},
		{name: "not JSON media type", method: "POST", path: "/admin/projects", body: `{"name":"t"}`, contentType: "text/plain", status: 415},
		{name: "get project by id", method: "GET", path: "/admin/projects/{p1}", status: 200, check: func(t *testing.T, b map[string]any) { wantField(t, b, "name", "acme") }},
		{name: "get project by name", method: "GET", path: "/admin/projects/acme", status: 200, check: func(t *testing.T, b map[string]any) { wantField(t, b, "id", e.vars["p1"]) }},
		{name: "get unknown project", method: "GET", path: "/admin/projects/proj_nope", status: 404, code: "project_not_found"},
		{name: "patch project", method: "PATCH", path: "/admin/projects/{p1}", body: `{"rpm":200,"budget":null,"cache":null}`, status: 200,
			wantFieldNone: "budget", check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "rpm", 200)
				wantField(t, b, "tpm", 5000) // untouched
				wantField(t, b, "log_bodies", true)
				if b["labels"] == nil || b["cache"] != nil {
					t.Errorf("patch touched labels or kept cache: %v", b)
				}
			}},
		{name: "patch project cache object", method: "PATCH", path: "/admin/projects/{p1}",
			body: `{"cache":{"exact":{"enabled":true,"ttl_seconds":600}}}`, status: 200, check: func(t *testing.T, b map[string]any) {
				if c, _ := b["cache"].(map[string]any); fmt.Sprint(c) != "map[exact:map[enabled:true ttl_seconds:600] semantic:map[enabled:<nil>]]" {
					t.Errorf("cache %v", b["cache"])
				}
			}},
		{name: "patch project cache ttl only", method: "PATCH", path: "/admin/projects/{p1}",
			body: `{"cache":{"exact":{"ttl_seconds":60}}}`, status: 200, check: func(t *testing.T, b map[string]any) {
				if c, _ := b["cache"].(map[string]any); fmt.Sprint(c) != "map[exact:map[enabled:<nil> ttl_seconds:60] semantic:map[enabled:<nil>]]" {
					t.Errorf("cache %v", b["cache"])
				}
			}},
		{name: "patch project semantic cache without an embedder", method: "PATCH", path: "/admin/projects/{p1}",
			body: `{"cache":{"semantic":{"enabled":true}}}`, status: 400, param: "cache", code: "semantic_unavailable"},
		{name: "patch project semantic threshold", method: "PATCH", path: "/admin/projects/{p1}",
			body: `{"cache":{"semantic":{"threshold":0.9},"exact":{"ttl_seconds":60}}}`, status: 200, check: func(t *testing.T, b map[string]any) {
				if c, _ := b["cache"].(map[string]any); fmt.Sprint(c) != "map[exact:map[enabled:<nil> ttl_seconds:60] semantic:map[enabled:<nil> threshold:0.9]]" {
					t.Errorf("cache %v", b["cache"])
				}
			}},
		{name: "patch project semantic threshold out of range", method: "PATCH", path: "/admin/projects/{p1}",
			body: `{"cache":{"semantic":{"threshold":1.5}}}`, status: 400, param: "cache", msg: "above 0 and at most 1"},
		{name: "patch project cache ttl too long", method: "PATCH", path: "/admin/projects/{p1}", body: `{"cache":{"exact":{"ttl_seconds":99999999}}}`,
			status: 400, param: "cache", msg: "at most 31536000"},
		{name: "patch project cache wrong type", method: "PATCH", path: "/admin/projects/{p1}", body: `{"cache":"yes"}`,
			status: 400, param: "cache", msg: "a boolean or an object"},
		{name: "patch project cache unknown field", method: "PATCH", path: "/admin/projects/{p1}", body: `{"cache":{"exact":{"ttl":5}}}`,
			status: 400, param: "cache", msg: "unknown field"},
		{name: "patch project read-only field", method: "PATCH", path: "/admin/projects/{p1}", body: `{"id":"proj_x"}`, status: 400, param: "id"},
		{name: "patch project wrong type", method: "PATCH", path: "/admin/projects/{p1}", body: `{"tpm":"lots"}`, status: 400, param: "tpm", msg: "integer"},
		{name: "patch project null name", method: "PATCH", path: "/admin/projects/{p1}", body: `{"name":null}`, status: 400, param: "name"},
		{name: "patch unknown project", method: "PATCH", path: "/admin/projects/proj_nope", body: `{"rpm":1}`, status: 404},
		{name: "patch config project", method: "PATCH", path: "/admin/projects/{cfgproj}", body: `{"rpm":1}`, status: 403, code: "read_only"},
		{name: "delete config project", method: "DELETE", path: "/admin/projects/config-proj", status: 403, code: "read_only"},
		{name: "create second project", method: "POST", path: "/admin/projects", body: `{"name":"beta"}`, status: 201, save: map[string]string{"p2": "id"}},
		{name: "rename onto a taken name", method: "PATCH", path: "/admin/projects/{p2}", body: `{"name":"acme"}`, status: 409, param: "name"},
		{name: "list projects page 1", method: "GET", path: "/admin/projects?limit=2", status: 200, save: map[string]string{"cursor": "next_after"},
			check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "has_more", true)
				if got := ids(b); len(got) != 2 {
					t.Errorf("page 1: %v", got)
				}
			}},
		{name: "list projects page 2", method: "GET", path: "/admin/projects?limit=2&after={cursor}", status: 200, wantFieldNone: "next_after",
			check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "has_more", false)
				if got := ids(b); len(got) != 1 {
					t.Errorf("page 2: %v", got)
				}
			}},
		{name: "list limit 0", method: "GET", path: "/admin/projects?limit=0", status: 400, param: "limit"},
		{name: "list limit too big", method: "GET", path: "/admin/projects?limit=501", status: 400, param: "limit"},
		{name: "list limit not a number", method: "GET", path: "/admin/projects?limit=ten", status: 400, param: "limit"},
		{name: "list unknown parameter", method: "GET", path: "/admin/projects?project=acme", status: 400, param: "project"},

		// Keys.
		{name: "create key", method: "POST", path: "/admin/keys", status: 201,
			body: `{"project":"acme","name":"ci","rpm":60,"tpm":1000,"budget":{"usd":10,"period":"month"},"models":["gpt-4o"],"labels":{"env":"ci"},"expires_at":"2099-01-02T03:04:05Z"}`,
			save: map[string]string{"k1": "id", "secret1": "key", "prefix1": "prefix"},
			check: func(t *testing.T, b map[string]any) {
				secret, _ := b["key"].(string)
				if !regexp.MustCompile(`^gh-[0-9A-Za-z]{32}$`).MatchString(secret) {
					t.Errorf("secret %q: want gh- and 32 base62 characters", secret)
				}
				wantField(t, b, "prefix", secret[:prefixLen])
				wantField(t, b, "status", "active")
				wantField(t, b, "rpm", 60)
				wantField(t, b, "expires_at", "2099-01-02T03:04:05Z")
				wantField(t, b, "no_cache", false)
			}},
		{name: "bar a key from the cache", method: "PATCH", path: "/admin/keys/{k1}", body: `{"no_cache":true}`, status: 200,
			check: func(t *testing.T, b map[string]any) { wantField(t, b, "no_cache", true) }},
		{name: "no_cache wrong type", method: "PATCH", path: "/admin/keys/{k1}", body: `{"no_cache":"yes"}`, status: 400, param: "no_cache"},
		{name: "let the key use the cache again", method: "PATCH", path: "/admin/keys/{k1}", body: `{"no_cache":false}`, status: 200,
			check: func(t *testing.T, b map[string]any) { wantField(t, b, "no_cache", false) }},
		{name: "create key in an unknown project", method: "POST", path: "/admin/keys", body: `{"project":"nope"}`, status: 400, param: "project", code: "unknown_project"},
		{name: "create key without project", method: "POST", path: "/admin/keys", body: `{"name":"x"}`, status: 400, param: "project", code: "missing_field"},
		{name: "create key project wrong type", method: "POST", path: "/admin/keys", body: `{"project":7}`, status: 400, param: "project"},
		{name: "create key negative rpm", method: "POST", path: "/admin/keys", body: `{"project":"acme","rpm":-5}`, status: 400, param: "rpm"},
		{name: "create key rpm as string", method: "POST", path: "/admin/keys", body: `{"project":"acme","rpm":"60"}`, status: 400, param: "rpm", msg: "not a string"},
		{name: "create key expired", method: "POST", path: "/admin/keys", body: `{"project":"acme","expires_at":"2000-01-01T00:00:00Z"}`, status: 400, param: "expires_at", msg: "future"},
		{name: "create key bad time", method: "POST", path: "/admin/keys", body: `{"project":"acme","expires_at":"tomorrow"}`, status: 400, param: "expires_at"},
		{name: "create key models not a list", method: "POST", path: "/admin/keys", body: `{"project":"acme","models":"gpt-4o"}`, status: 400, param: "models"},
		{name: "create key label not a string", method: "POST", path: "/admin/keys", body: `{"project":"acme","labels":{"a":1}}`, status: 400, param: "labels"},
		{name: "create key bad budget period", method: "POST", path: "/admin/keys", body: `{"project":"acme","budget":{"usd":10,"period":"fortnight"}}`, status: 400, param: "budget", msg: "fortnight"},
		{name: "create key unknown field", method: "POST", path: "/admin/keys", body: `{"project":"acme","secret":"mine"}`, status: 400, param: "secret"},
		{name: "create key in the config project", method: "POST", path: "/admin/keys", body: `{"project":"config-proj","name":"extra"}`, status: 201,
			save: map[string]string{"k2": "id"}},
		{name: "get key hides the secret", method: "GET", path: "/admin/keys/{k1}", status: 200, wantFieldNone: "key",
			check: func(t *testing.T, b map[string]any) { wantField(t, b, "name", "ci") }},
		{name: "list keys", method: "GET", path: "/admin/keys", status: 200, check: func(t *testing.T, b map[string]any) {
			got := ids(b)
			if len(got) != 3 || got[2] != "static:cfg" {
				t.Errorf("keys %v: want two stored then static:cfg", got)
			}
			for _, d := range b["data"].([]any) {
				k := d.(map[string]any)
				if _, ok := k["key"]; ok {
					t.Errorf("list shows a secret: %v", k)
				}
				wantField(t, k, "read_only", k["id"] == "static:cfg")
			}
		}},
		{name: "list keys paged across the static key", method: "GET", path: "/admin/keys?limit=2&after={k1}", status: 200, check: func(t *testing.T, b map[string]any) {
			wantField(t, b, "has_more", false)
			if got := ids(b); len(got) != 2 || got[1] != "static:cfg" {
				t.Errorf("keys after k1: %v", got)
			}
		}},
		{name: "list keys of a project", method: "GET", path: "/admin/keys?project=acme", status: 200, check: func(t *testing.T, b map[string]any) {
			if got := ids(b); len(got) != 1 {
				t.Errorf("acme keys: %v", got)
			}
		}},
		{name: "list keys of the config project", method: "GET", path: "/admin/keys?project={cfgproj}&limit=1", status: 200, check: func(t *testing.T, b map[string]any) {
			wantField(t, b, "has_more", true)
		}},
		{name: "list keys of an unknown project", method: "GET", path: "/admin/keys?project=nope", status: 400, param: "project"},
		{name: "search keys by name", method: "GET", path: "/admin/keys?search=CI", status: 200, check: func(t *testing.T, b map[string]any) {
			if got := ids(b); len(got) != 1 || got[0] != e.vars["k1"] {
				t.Errorf("search CI: %v", got)
			}
		}},
		{name: "search finds a config key", method: "GET", path: "/admin/keys?search=cf", status: 200, check: func(t *testing.T, b map[string]any) {
			if got := ids(b); len(got) != 1 || got[0] != "static:cfg" {
				t.Errorf("search cf: %v", got)
			}
		}},
		{name: "search keys by prefix", method: "GET", path: "/admin/keys?project=acme&search={prefix1}", status: 200, check: func(t *testing.T, b map[string]any) {
			if got := ids(b); len(got) != 1 || got[0] != e.vars["k1"] {
				t.Errorf("search by prefix: %v", got)
			}
		}},
		{name: "search without a match", method: "GET", path: "/admin/keys?search=zzz", status: 200, check: func(t *testing.T, b map[string]any) {
			if got := ids(b); len(got) != 0 {
				t.Errorf("search zzz: %v", got)
			}
		}},
		{name: "projects take no search", method: "GET", path: "/admin/projects?search=a", status: 400, param: "search"},

		{name: "patch key", method: "PATCH", path: "/admin/keys/{k1}", body: `{"rpm":null,"models":null,"name":"ci-2","expires_at":null}`, status: 200,
			wantFieldNone: "models", check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "rpm", 0)
				wantField(t, b, "tpm", 1000)
				wantField(t, b, "name", "ci-2")
				if _, ok := b["expires_at"]; ok {
					t.Errorf("expiry not cleared: %v", b)
				}
			}},
		{name: "patch key project", method: "PATCH", path: "/admin/keys/{k1}", body: `{"project":"beta"}`, status: 400, param: "project", code: "immutable_field"},
		{name: "patch key negative tpm", method: "PATCH", path: "/admin/keys/{k1}", body: `{"tpm":-1}`, status: 400, param: "tpm"},
		{name: "patch static key", method: "PATCH", path: "/admin/keys/static:cfg", body: `{"rpm":1}`, status: 403, code: "read_only"},
		{name: "revoke static key", method: "DELETE", path: "/admin/keys/static:cfg", status: 403, code: "read_only"},
		{name: "rotate static key", method: "POST", path: "/admin/keys/static:cfg/rotate", status: 403, code: "read_only"},
		{name: "get static key", method: "GET", path: "/admin/keys/static:cfg", status: 200, check: func(t *testing.T, b map[string]any) {
			wantField(t, b, "read_only", true)
			wantField(t, b, "project_id", e.vars["cfgproj"])
		}},
		{name: "rotate key", method: "POST", path: "/admin/keys/{k1}/rotate", status: 200, save: map[string]string{"secret2": "key"},
			check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "id", e.vars["k1"])
				wantField(t, b, "name", "ci-2")
				if b["key"] == e.vars["secret1"] {
					t.Errorf("rotation kept the secret")
				}
			}},
		{name: "delete project with an active key", method: "DELETE", path: "/admin/projects/{p1}", status: 409, code: "project_has_active_keys"},
		{name: "revoke key", method: "DELETE", path: "/admin/keys/{k1}", status: 200, wantField: "revoked_at",
			save:  map[string]string{"revoked": "revoked_at"},
			check: func(t *testing.T, b map[string]any) { wantField(t, b, "status", "revoked") }},
		{name: "revoke key again keeps the time", method: "DELETE", path: "/admin/keys/{k1}", status: 200,
			check: func(t *testing.T, b map[string]any) { wantField(t, b, "revoked_at", e.vars["revoked"]) }},
		{name: "rotate revoked key", method: "POST", path: "/admin/keys/{k1}/rotate", status: 409, code: "key_revoked"},
		{name: "get unknown key", method: "GET", path: "/admin/keys/key_nope", status: 404, code: "key_not_found"},
		{name: "revoke unknown key", method: "DELETE", path: "/admin/keys/key_nope", status: 404},
		{name: "delete project", method: "DELETE", path: "/admin/projects/{p1}", status: 200,
			check: func(t *testing.T, b map[string]any) { wantField(t, b, "deleted", true) }},
		{name: "key went with its project", method: "GET", path: "/admin/keys/{k1}", status: 404},
		{name: "delete project again", method: "DELETE", path: "/admin/projects/{p1}", status: 404},

		// Customers.
		{name: "create customer", method: "POST", path: "/admin/customers", status: 201,
			body: `{"project":"beta","external_id":"user-1","name":"Ann","daily_usd":5,"monthly_usd":50.5,"on_exceed":"downgrade","downgrade_model":"mini","labels":{"tier":"free"}}`,
			save: map[string]string{"c1": "id"},
			check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "project_id", e.vars["p2"])
				wantField(t, b, "daily_usd", 5)
			}},
		{name: "customer defaults to block", method: "POST", path: "/admin/customers", body: `{"project":"{p2}","external_id":"user-2"}`, status: 201,
			save: map[string]string{"c2": "id"}, check: func(t *testing.T, b map[string]any) { wantField(t, b, "on_exceed", "block") }},
		{name: "duplicate customer", method: "POST", path: "/admin/customers", body: `{"project":"beta","external_id":"user-1"}`, status: 409, param: "external_id"},
		{name: "customer without external_id", method: "POST", path: "/admin/customers", body: `{"project":"beta"}`, status: 400, param: "external_id"},
		{name: "customer empty external_id", method: "POST", path: "/admin/customers", body: `{"project":"beta","external_id":""}`, status: 400, param: "external_id"},
		{name: "customer bad on_exceed", method: "POST", path: "/admin/customers", body: `{"project":"beta","external_id":"u","on_exceed":"explode"}`, status: 400, param: "on_exceed"},
		{name: "customer downgrade without model", method: "POST", path: "/admin/customers", body: `{"project":"beta","external_id":"u","on_exceed":"downgrade"}`, status: 400, param: "downgrade_model"},
		{name: "customer negative budget", method: "POST", path: "/admin/customers", body: `{"project":"beta","external_id":"u","daily_usd":-1}`, status: 400, param: "daily_usd"},
		{name: "customer budget wrong type", method: "POST", path: "/admin/customers", body: `{"project":"beta","external_id":"u","monthly_usd":"ten"}`, status: 400, param: "monthly_usd"},
		{name: "customer unknown project", method: "POST", path: "/admin/customers", body: `{"project":"nope","external_id":"u"}`, status: 400, param: "project"},
		{name: "customer unknown field", method: "POST", path: "/admin/customers", body: `{"project":"beta","external_id":"u","email":"a@b"}`, status: 400, param: "email"},
		{name: "list customers of a project", method: "GET", path: "/admin/customers?project=beta&limit=1", status: 200,
			save: map[string]string{"ccursor": "next_after"}, check: func(t *testing.T, b map[string]any) { wantField(t, b, "has_more", true) }},
		{name: "list customers page 2", method: "GET", path: "/admin/customers?project=beta&limit=1&after={ccursor}", status: 200,
			check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "has_more", false)
				// IDs order by creation time to the millisecond: two
				// customers made in the same one may list either way, but
				// page 2 holds the one page 1 did not.
				want := e.vars["c2"]
				if e.vars["ccursor"] == want {
					want = e.vars["c1"]
				}
				if got := ids(b); len(got) != 1 || got[0] != want {
					t.Errorf("page 2: %v, want [%s] (page 1 ended at %s)", got, want, e.vars["ccursor"])
				}
			}},
		{name: "list customers of the config project", method: "GET", path: "/admin/customers?project=config-proj", status: 200,
			check: func(t *testing.T, b map[string]any) {
				if got := ids(b); len(got) != 0 {
					t.Errorf("config-proj customers: %v", got)
				}
			}},
		{name: "get customer", method: "GET", path: "/admin/customers/{c1}", status: 200, check: func(t *testing.T, b map[string]any) { wantField(t, b, "name", "Ann") }},
		{name: "patch customer", method: "PATCH", path: "/admin/customers/{c1}", body: `{"daily_usd":null,"name":"Alice"}`, status: 200,
			wantFieldNone: "daily_usd", check: func(t *testing.T, b map[string]any) {
				wantField(t, b, "name", "Alice")
				wantField(t, b, "monthly_usd", 50.5)
			}},
		{name: "patch customer clears the downgrade model", method: "PATCH", path: "/admin/customers/{c1}", body: `{"downgrade_model":null}`, status: 400, param: "downgrade_model"},
		{name: "patch customer onto a taken external_id", method: "PATCH", path: "/admin/customers/{c2}", body: `{"external_id":"user-1"}`, status: 409, param: "external_id"},
		{name: "patch customer project", method: "PATCH", path: "/admin/customers/{c2}", body: `{"project":"acme"}`, status: 400, param: "project"},
		{name: "patch unknown customer", method: "PATCH", path: "/admin/customers/cus_nope", body: `{"name":"x"}`, status: 404, code: "customer_not_found"},
		{name: "delete customer", method: "DELETE", path: "/admin/customers/{c1}", status: 200},
		{name: "delete customer again", method: "DELETE", path: "/admin/customers/{c1}", status: 404},
		{name: "get deleted customer", method: "GET", path: "/admin/customers/{c1}", status: 404},
	})
	for _, name := range []string{"secret1", "secret2"} {
		if s := e.vars[name]; s == "" || strings.Contains(e.logs.String(), s) {
			e.t.Errorf("%s missing or logged", name)
		}
	}
}

func TestAdminSQLite(t *testing.T) {
	scenario(newEnv(t, openSQLite(t)))
}

// TestSecretsStoredAsHashes checks what the store keeps of a secret: its
// SHA-256, which finds the key until rotation replaces it.
func TestSecretsStoredAsHashes(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	e.run([]step{
		{name: "project", method: "POST", path: "/admin/projects", body: `{"name":"p"}`, status: 201},
		{name: "key", method: "POST", path: "/admin/keys", body: `{"project":"p"}`, status: 201, save: map[string]string{"id": "id", "s1": "key"}},
		{name: "rotate", method: "POST", path: "/admin/keys/{id}/rotate", status: 200, save: map[string]string{"s2": "key"}},
	})
	ctx := context.Background()
	if _, _, err := e.st.KeyByHash(ctx, auth.HashKey(e.vars["s1"])); err == nil {
		t.Error("the old secret still finds the key after rotation")
	}
	k, _, err := e.st.KeyByHash(ctx, auth.HashKey(e.vars["s2"]))
	if err != nil || k.ID != e.vars["id"] {
		t.Fatalf("new secret: %v %v", k, err)
	}
	if k.Prefix != e.vars["s2"][:prefixLen] {
		t.Errorf("prefix %q", k.Prefix)
	}
}

func TestNewSecret(t *testing.T) {
	seen := map[string]bool{}
	counts := map[rune]int{}
	for range 2000 {
		s := NewSecret()
		if !strings.HasPrefix(s, SecretPrefix) || len(s) != len(SecretPrefix)+secretLen {
			t.Fatalf("secret %q", s)
		}
		if seen[s] {
			t.Fatalf("repeated secret %q", s)
		}
		seen[s] = true
		for _, c := range s[len(SecretPrefix):] {
			counts[c]++
		}
	}
	if len(counts) != 62 {
		t.Errorf("%d distinct characters in 64,000, want all 62", len(counts))
	}
}

// TestZeroAdminKeyRefusesAll: a handler built without an admin key lets
// nobody in, not even someone sending an empty bearer.
func TestZeroAdminKeyRefusesAll(t *testing.T) {
	h := New(Options{Store: openSQLite(t)})
	for _, hdr := range []string{"", "Bearer ", "Bearer x"} {
		req := httptest.NewRequest("GET", "/admin/projects", nil)
		if hdr != "" {
			req.Header.Set("Authorization", hdr)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%q: %d", hdr, w.Code)
		}
	}
}
