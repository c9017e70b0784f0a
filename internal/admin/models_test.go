package admin

import (
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

func (sessions) AuthorizeSession(r *http.Request) (bool, *llm.Error) {
	c, err := r.Cookie("gatehouse_session")
	switch {
	case err != nil:
		return false, nil
	case c.Value == "good":
		return true, nil
	}
	return false, &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "authentication_error", Code: "session_expired", Message: "ended"}
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
