package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// concurrently calls f times times from each of goroutines goroutines at
// once and returns when all are done.
func concurrently(goroutines, times int, f func()) {
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range times {
				f()
			}
		})
	}
	wg.Wait()
}

func wantSeries(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("missing %s", w)
		}
	}
}

type sinkStats struct{}

func (sinkStats) Depth() int       { return 3 }
func (sinkStats) Written() uint64  { return 10 }
func (sinkStats) Spilled() uint64  { return 4 }
func (sinkStats) Replayed() uint64 { return 2 }
func (sinkStats) Dropped() uint64  { return 1 }

func TestInstrumentsAreServed(t *testing.T) {
	m := New()
	for range 2 { // the second goes through the cached bundle
		m.Observe(&RequestObs{Project: "qa", Model: "chat", Provider: "up", Route: "/v1/chat/completions", Code: 200,
			Took: 120 * time.Millisecond, TTFT: 30 * time.Millisecond, Overhead: 200 * time.Microsecond,
			PromptTokens: 10, CompletionTokens: 20, CachedTokens: 4, ReasoningTokens: 5, CostMicros: 1500, Cache: "bypass"})
	}
	m.Observe(&RequestObs{Project: "qa", Model: "chat", Route: "/v1/chat/completions", Code: 429, ErrorKind: "budget",
		DenialScope: "key", DenialKind: "budget", Cache: "bypass"})
	m.Attempt("chat", "failover", "up", "gpt-4o-mini", "failure")
	m.Attempt("chat", "failover", "up2", "gpt-4o-mini", "success")
	m.Breaker("up", "gpt-4o-mini", 2, "open", true)
	m.HealthCheck("box", true)
	m.Begin()
	m.Begin()
	m.End()
	m.Deployments(func() []DeploymentLoad {
		return []DeploymentLoad{{Provider: "up", Model: "gpt-4o-mini", Requests: 2, Tokens: 900}}
	})
	m.UsageSink(sinkStats{})
	m.Settles(func() SettleStats { return SettleStats{Queued: 7, Settled: 512, Calls: 3, Waited: 2, Lost: 1} })
	m.Admissions(func() AdmitStats { return AdmitStats{Calls: 40, Queued: 96} })

	wantSeries(t, scrape(t, m),
		`gatehouse_requests_total{code="200",error_kind="",model="chat",route="/v1/chat/completions"} 2`,
		`gatehouse_requests_total{code="429",error_kind="budget",model="chat",route="/v1/chat/completions"} 1`,
		`gatehouse_tokens_total{model="chat",project="qa",provider="up",type="prompt"} 20`,
		`gatehouse_tokens_total{model="chat",project="qa",provider="up",type="completion"} 40`,
		`gatehouse_tokens_total{model="chat",project="qa",provider="up",type="cached"} 8`,
		`gatehouse_tokens_total{model="chat",project="qa",provider="up",type="reasoning"} 10`,
		`gatehouse_cost_usd_total{model="chat",project="qa",provider="up"} 0.003`,
		`gatehouse_cache_requests_total{model="chat",project="qa",result="bypass"} 3`,
		`gatehouse_limit_denials_total{kind="budget",project="qa",scope="key"} 1`,
		`gatehouse_overhead_seconds_count{route="/v1/chat/completions"} 3`,
		`gatehouse_requests_in_flight 1`,
		`gatehouse_routing_decisions_total{model="chat",provider="up",strategy="failover"} 1`,
		`gatehouse_upstream_attempts_total{model="gpt-4o-mini",outcome="failure",provider="up"} 1`,
		`gatehouse_breaker_state{model="gpt-4o-mini",provider="up"} 2`,
		`gatehouse_breaker_transitions_total{model="gpt-4o-mini",provider="up",state="open"} 1`,
		`gatehouse_upstream_health_check_failing{provider="box"} 1`,
		`gatehouse_time_to_first_token_seconds_count{model="chat"} 2`,
		`gatehouse_deployment_in_flight_requests{model="gpt-4o-mini",provider="up"} 2`,
		`gatehouse_deployment_in_flight_tokens{model="gpt-4o-mini",provider="up"} 900`,
		`gatehouse_usage_queue_depth 3`,
		`gatehouse_usage_records_spilled_total 4`,
		`gatehouse_usage_records_replayed_total 2`,
		`gatehouse_usage_records_dropped_total 1`,
		`gatehouse_usage_records_written_total 10`,
		`gatehouse_settle_queue_depth 7`,
		`gatehouse_settles_total 512`,
		`gatehouse_settle_calls_total 3`,
		`gatehouse_settle_waits_total 2`,
		`gatehouse_settles_lost_total 1`,
		`gatehouse_admission_calls_total 40`,
		`gatehouse_admissions_queued_total 96`,
		`go_goroutines`,
	)
	// Two processes (or tests) never share instruments.
	if strings.Contains(scrape(t, New()), `provider="up"`) {
		t.Fatal("instruments leaked between registries")
	}
	var none *Metrics
	none.Observe(&RequestObs{Model: "m"}) // a nil Metrics records nothing
}

// TestForgetDropsADeploymentsSeries: after a reload removes a
// deployment, its series are gone and the others stay.
func TestForgetDropsADeploymentsSeries(t *testing.T) {
	m := New()
	m.Attempt("chat", "round-robin", "old", "m1", "success")
	m.Attempt("chat", "round-robin", "kept", "m1", "success")
	m.Breaker("old", "m1", 0, "closed", true)
	m.Breaker("kept", "m1", 0, "closed", true)
	m.HealthCheck("old", false)
	m.Forget("old", "m1")
	m.ForgetProvider("old")
	body := scrape(t, m)
	if strings.Contains(body, `provider="old"`) {
		t.Errorf("series of the removed deployment remain:\n%s", body)
	}
	wantSeries(t, body, `gatehouse_breaker_state{model="m1",provider="kept"} 0`,
		`gatehouse_upstream_attempts_total{model="m1",outcome="success",provider="kept"} 1`)
}

// TestAttemptsCountExactly: attempts counted from many goroutines, through
// the resolved counters, come out exact at scrape time; and a deployment
// a reload removed and a later one brings back counts again from zero.
func TestAttemptsCountExactly(t *testing.T) {
	m := New()
	concurrently(8, 500, func() { m.Attempt("chat", "failover", "up", "m1", "success") })
	wantSeries(t, scrape(t, m),
		`gatehouse_routing_decisions_total{model="chat",provider="up",strategy="failover"} 4000`,
		`gatehouse_upstream_attempts_total{model="m1",outcome="success",provider="up"} 4000`)

	m.Forget("up", "m1")
	m.ForgetProvider("up")
	m.Attempt("chat", "failover", "up", "m1", "success")
	wantSeries(t, scrape(t, m),
		`gatehouse_routing_decisions_total{model="chat",provider="up",strategy="failover"} 1`,
		`gatehouse_upstream_attempts_total{model="m1",outcome="success",provider="up"} 1`)
}

// TestInFlightCountsExactly: requests begun and ended from many
// goroutines leave the gauge at what is still in flight, served as the
// client library's gauge was (help, type, value).
func TestInFlightCountsExactly(t *testing.T) {
	m := New()
	concurrently(8, 1000, func() {
		m.Begin()
		m.Begin()
		m.End()
	})
	wantSeries(t, scrape(t, m), "# HELP gatehouse_requests_in_flight API requests being served.\n"+
		"# TYPE gatehouse_requests_in_flight gauge\ngatehouse_requests_in_flight 8000\n")
	for range 8000 {
		m.End()
	}
	wantSeries(t, scrape(t, m), "\ngatehouse_requests_in_flight 0\n")
}
