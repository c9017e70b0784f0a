package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestInstrumentsAreServed(t *testing.T) {
	m := New()
	m.Request("chat", "chat", 200, "", 120*time.Millisecond, 30*time.Millisecond)
	m.Attempt("up", "gpt-4o-mini", "failure")
	m.Attempt("up2", "gpt-4o-mini", "success")
	m.Breaker("up", "gpt-4o-mini", 2, "open", true)
	m.HealthCheck("box", true)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`gatehouse_requests_total{code="200",error_kind="",model="chat",route="chat"} 1`,
		`gatehouse_upstream_attempts_total{model="gpt-4o-mini",outcome="failure",provider="up"} 1`,
		`gatehouse_breaker_state{model="gpt-4o-mini",provider="up"} 2`,
		`gatehouse_breaker_transitions_total{model="gpt-4o-mini",provider="up",state="open"} 1`,
		`gatehouse_upstream_health_check_failing{provider="box"} 1`,
		`gatehouse_time_to_first_token_seconds_count{model="chat"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %s", want)
		}
	}
	// Two processes (or tests) never share instruments.
	other := New()
	rec = httptest.NewRecorder()
	other.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if strings.Contains(rec.Body.String(), `provider="up"`) {
		t.Fatal("instruments leaked between registries")
	}
	var none *Metrics
	none.Request("m", "chat", 200, "", time.Second, 0) // a nil Metrics records nothing
}
