package admin

import (
	"gatehouse/internal/auth"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	routing "gatehouse/internal/route"
)

func TestModels(t *testing.T) {
	pool := routing.NewPool(routing.PoolOptions{Breaker: routing.BreakerConfig{Failures: 1, Cooldown: time.Minute}})
	a := &provider.Deployment{Provider: "cloud", Type: "openai", Model: "gpt-4o", BaseURL: "https://user:pw@example.com/v1", APIKey: "sk-never-shown"}
	b := &provider.Deployment{Provider: "box", Type: "ollama", Model: "llama3", Local: true}
	g := pool.Group(routing.Spec{Name: "chat", Strategy: routing.Failover, Targets: []*provider.Deployment{a, b}})
	table := routing.NewTable([]*routing.Group{g})
	l, _ := g.Pick(nil, 10, false)
	l.Done(routing.Failure, 0, 0) // cloud's breaker opens
	l, _ = g.Pick(nil, 10, false)
	l.Done(routing.Success, 25*time.Millisecond, 0)

	e := newEnv(t, openSQLite(t), func(o *Options) { o.Routes = table.Snapshot })
	status, body := e.do(http.MethodGet, "/admin/models", "", "", "")
	if status != http.StatusOK {
		t.Fatalf("GET /admin/models: %d %v", status, body)
	}
	data := body["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("models %v", data)
	}
	m := data[0].(map[string]any)
	wantField(t, m, "model", "chat")
	wantField(t, m, "strategy", "failover")
	deps := m["deployments"].([]any)
	cloud, box := deps[0].(map[string]any), deps[1].(map[string]any)
	wantField(t, cloud, "provider", "cloud")
	br := cloud["breaker"].(map[string]any)
	if br["state"] != "open" || br["since"] == nil || br["until"] == nil || cloud["error_rate"] != nil {
		t.Errorf("cloud after a failure: %v", cloud)
	}
	if box["latency_ms"] != 25.0 || box["local"] != true || box["breaker"].(map[string]any)["state"] != "closed" {
		t.Errorf("box after an answer: %v", box)
	}
	for _, secret := range []string{"sk-never-shown", "user:pw", "example.com"} {
		if containsString(body, secret) {
			t.Errorf("GET /admin/models shows %q", secret)
		}
	}

	// A client key, and a gateway that does not report routing.
	if status, _ := e.do(http.MethodGet, "/admin/models", "", "Bearer "+clientSecret, ""); status != http.StatusForbidden {
		t.Errorf("client key: %d", status)
	}
	if status, _ := e.do(http.MethodGet, "/admin/models?limit=5", "", "", ""); status != http.StatusBadRequest {
		t.Errorf("a parameter: %d, want 400", status)
	}
	off := newEnv(t, openSQLite(t))
	if status, body := off.do(http.MethodGet, "/admin/models", "", "", ""); status != http.StatusNotImplemented {
		t.Errorf("without Routes: %d %v", status, body)
	}
}

// TestModelByName covers GET /admin/models/{model}: a configured model, a
// discovered one and its alias, a name with a slash, health_checked, and
// the refusals.
func TestModelByName(t *testing.T) {
	pool := routing.NewPool(routing.PoolOptions{})
	chat := pool.Group(routing.Spec{Name: "chat", Strategy: routing.Failover, Targets: []*provider.Deployment{
		{Provider: "cloud", Type: "openai", Model: "gpt-4o"}, {Provider: "box", Type: "ollama", Model: "llama3", Local: true}}})
	box := func(name string) *routing.Group {
		return pool.Group(routing.Spec{Name: name, Strategy: routing.Failover,
			Targets: []*provider.Deployment{{Provider: "box", Type: "ollama", Model: "qwen3:latest", Local: true}}})
	}
	table := routing.NewTable([]*routing.Group{chat})
	table.SetDiscovered(routing.NewDiscovered([]*routing.Group{box("qwen3:latest"), box("box/qwen3:latest")}, []*routing.Group{box("qwen3")}))
	pool.SetDown("box", false) // box's health check passes; cloud has none

	e := newEnv(t, openSQLite(t), func(o *Options) { o.Routes, o.Route = table.Snapshot, table.State })
	e.run([]step{
		{name: "configured", method: "GET", path: "/admin/models/chat", status: 200, check: func(t *testing.T, b map[string]any) {
			wantField(t, b, "model", "chat")
			wantField(t, b, "discovered", false)
			deps := b["deployments"].([]any)
			cloud, box := deps[0].(map[string]any), deps[1].(map[string]any)
			if cloud["health_checked"] != false || box["health_checked"] != true || box["down"] != false {
				t.Errorf("health: cloud %v, box %v", cloud, box)
			}
		}},
		{name: "discovered", method: "GET", path: "/admin/models/qwen3:latest", status: 200, check: func(t *testing.T, b map[string]any) {
			wantField(t, b, "model", "qwen3:latest")
			wantField(t, b, "discovered", true)
		}},
		{name: "an alias, which the list does not show", method: "GET", path: "/admin/models/qwen3", status: 200,
			check: func(t *testing.T, b map[string]any) { wantField(t, b, "model", "qwen3") }},
		{name: "unknown", method: "GET", path: "/admin/models/gpt-5", status: 404, code: "model_not_found", msg: `"gpt-5"`},
		{name: "a parameter", method: "GET", path: "/admin/models/chat?x=1", status: 400, param: "x", code: "unknown_parameter"},
		{name: "read only", method: "DELETE", path: "/admin/models/chat", status: 405, code: "method_not_allowed"},
		{name: "client key", method: "GET", path: "/admin/models/chat", key: "Bearer " + clientSecret, status: 403},
		{name: "no key", method: "GET", path: "/admin/models/chat", key: "-", status: 401, code: "missing_admin_key"},
	})

	// A discovered model's qualified name has a slash, escaped in the
	// path (env.do checks the unescaped path, a segment too long).
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/admin/models/box%2Fqwen3:latest", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"model":"box/qwen3:latest"`) {
		t.Fatalf("escaped slash: %d %s", resp.StatusCode, raw)
	}
	for _, p := range e.spec.Check(http.MethodGet, req.URL.EscapedPath(), resp.StatusCode, resp.Header, raw) {
		t.Errorf("openapi: %s", p)
	}

	// Without Route the list is searched (no aliases then); without
	// either, 501.
	listOnly := newEnv(t, openSQLite(t), func(o *Options) { o.Routes = table.Snapshot })
	listOnly.run([]step{
		{name: "listed", method: "GET", path: "/admin/models/qwen3:latest", status: 200},
		{name: "alias", method: "GET", path: "/admin/models/qwen3", status: 404, code: "model_not_found"},
	})
	newEnv(t, openSQLite(t)).run([]step{
		{name: "no routes", method: "GET", path: "/admin/models/chat", status: 501, code: "not_implemented"},
	})
}

// containsString reports whether s appears in any string of v.
func containsString(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, s)
	case map[string]any:
		for _, y := range x {
			if containsString(y, s) {
				return true
			}
		}
	case []any:
		for _, y := range x {
			if containsString(y, s) {
				return true
			}
		}
	}
	return false
}

// sessions stands in for the dashboard's session check: "good" is a live
// session, "ended" one that is over, no cookie none.
type sessions struct{}

func (sessions) AuthorizeSession(r *http.Request) (*auth.Actor, *llm.Error) {
	c, err := r.Cookie("gatehouse_session")
	switch {
	case err != nil:
		return nil, nil
	case c.Value == "good":
		return &auth.Actor{Name: "root", Role: auth.RoleAdmin, Session: true}, nil
	case c.Value == "viewer":
		return &auth.Actor{Name: "dash", Role: auth.RoleViewer, Session: true}, nil
	}
	return nil, &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "authentication_error", Code: "session_expired", Message: "ended"}
}

func TestSessionStandsInForTheKey(t *testing.T) {
	e := newEnv(t, openSQLite(t), func(o *Options) { o.Sessions = sessions{} })
	get := func(cookie, bearer string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/admin/projects", nil)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "gatehouse_session", Value: cookie})
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
	}
	if s, _ := get("good", ""); s != http.StatusOK {
		t.Errorf("live session: %d", s)
	}
	if s, www := get("ended", ""); s != http.StatusUnauthorized || www == "" {
		t.Errorf("ended session: %d %q", s, www)
	}
	if s, _ := get("", ""); s != http.StatusUnauthorized {
		t.Errorf("nothing: %d", s)
	}
	// A wrong key is wrong even with a live session beside it: the key,
	// when sent, decides.
	if s, _ := get("good", "wrong"); s != http.StatusUnauthorized {
		t.Errorf("wrong key with a live session: %d", s)
	}
	if s, _ := get("ended", adminKey); s != http.StatusOK {
		t.Errorf("admin key with an ended session: %d", s)
	}
}
