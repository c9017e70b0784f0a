package route

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

func status(code int) *llm.Error {
	return &llm.Error{Kind: llm.KindUpstreamStatus, Status: code, Message: http.StatusText(code)}
}

// script answers attempts per provider, in order; a provider with no
// (more) answers succeeds.
type script struct {
	mu      sync.Mutex
	answers map[string][]Result
	calls   []string
}

func (s *script) try(_ context.Context, a Attempt) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := a.Deployment.Provider
	s.calls = append(s.calls, p)
	if rs := s.answers[p]; len(rs) > 0 {
		s.answers[p] = rs[1:]
		return rs[0]
	}
	return Result{}
}

func fail(e *llm.Error) Result { return Result{Err: e} }

func runOn(t *testing.T, clock *fakeClock, specs []Spec, sc *script, r Runner) (Report, *script) {
	t.Helper()
	pool := NewPool(PoolOptions{Clock: clock, Rand: func() float64 { return 0.5 }})
	var groups []*Group
	for _, s := range specs {
		groups = append(groups, pool.Group(s))
	}
	r.Table = NewTable(groups)
	r.Try = sc.try
	return r.Run(context.Background(), groups[0]), sc
}

func calls(sc *script) string {
	out := ""
	for i, c := range sc.calls {
		if i > 0 {
			out += ","
		}
		out += c
	}
	return out
}

func TestFailoverMovesOnForRetryableErrors(t *testing.T) {
	timeout := &llm.Error{Kind: llm.KindUpstreamTimeout, Status: 504}
	connect := &llm.Error{Kind: llm.KindUpstreamConnect, Status: 502}
	cases := []struct {
		name    string
		answers map[string][]Result
		retryOn []int
		calls   string
		status  int // 0: answered
	}{
		{"503 then next", map[string][]Result{"a": {fail(status(503))}}, nil, "a,b", 0},
		{"429 then next", map[string][]Result{"a": {fail(status(429))}}, nil, "a,b", 0},
		{"timeout then next", map[string][]Result{"a": {fail(timeout)}}, nil, "a,b", 0},
		{"connect, 500 then c", map[string][]Result{"a": {fail(connect)}, "b": {fail(status(500))}}, nil, "a,b,c", 0},
		{"400 is the client's", map[string][]Result{"a": {fail(status(400))}}, nil, "a", 400},
		{"404 configured to move on", map[string][]Result{"a": {fail(status(404))}}, []int{404}, "a,b", 0},
		{"started stream never retried", map[string][]Result{"a": {{Err: status(502), Started: true}}}, nil, "a", 502},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, sc := runOn(t, newFakeClock(), []Spec{{Name: "m", Strategy: Failover, Targets: targets(3), Retry: Retry{RetryOn: c.retryOn}}},
				&script{answers: c.answers}, Runner{})
			if calls(sc) != c.calls {
				t.Fatalf("calls %s, want %s", calls(sc), c.calls)
			}
			if c.status == 0 && (rep.Err != nil || rep.Answered.N != rep.Attempts || rep.Attempts != len(sc.calls)) {
				t.Fatalf("report %+v", rep)
			}
			if c.status != 0 && (rep.Err == nil || rep.Err.Status != c.status) {
				t.Fatalf("err %v, want status %d", rep.Err, c.status)
			}
		})
	}
}

// TestTooLargeNeverRetriedThere: an answer over the deployment's size
// bound moves on to the next deployment, but later rounds skip the
// deployment that sent it: the same call would come back as large.
func TestTooLargeNeverRetriedThere(t *testing.T) {
	tooLarge := &llm.Error{Kind: llm.KindUpstreamProtocol, Status: 502, Code: provider.CodeResponseTooLarge}
	protocol := &llm.Error{Kind: llm.KindUpstreamProtocol, Status: 502, Code: "upstream_malformed"}
	cases := []struct {
		name    string
		targets int
		answers map[string][]Result
		calls   string
		status  int // 0: answered
	}{
		{"alone", 1, map[string][]Result{"a": {fail(tooLarge), fail(tooLarge)}}, "a", 502},
		{"next, and next again", 2, map[string][]Result{"a": {fail(tooLarge), fail(tooLarge)}, "b": {fail(status(500))}}, "a,b,b", 0},
		{"other protocol failures are retried", 1, map[string][]Result{"a": {fail(protocol)}}, "a,a", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, sc := runOn(t, newFakeClock(), []Spec{{Name: "m", Strategy: Failover, Targets: targets(c.targets), Retry: Retry{MaxAttempts: 5}}},
				&script{answers: c.answers}, Runner{})
			if calls(sc) != c.calls {
				t.Fatalf("calls %s, want %s", calls(sc), c.calls)
			}
			if c.status == 0 && rep.Err != nil {
				t.Fatalf("err %v, want an answer", rep.Err)
			}
			if c.status != 0 && (rep.Err == nil || rep.Err.Code != provider.CodeResponseTooLarge) {
				t.Fatalf("err %v, want the too-large error", rep.Err)
			}
		})
	}
}

func TestRetryRoundsBackOffWithJitterUntilMaxAttempts(t *testing.T) {
	clock := newFakeClock()
	sc := &script{answers: map[string][]Result{"a": {fail(status(500)), fail(status(500)), fail(status(500)), fail(status(500))}}}
	rep, _ := runOn(t, clock, []Spec{{Name: "m", Targets: targets(1),
		Retry: Retry{MaxAttempts: 4, Backoff: 100 * time.Millisecond, MaxBackoff: 250 * time.Millisecond}}}, sc, Runner{})
	if rep.Attempts != 4 || rep.Err == nil || rep.Err.Status != 500 || rep.Answered.N != 0 {
		t.Fatalf("report %+v", rep)
	}
	// rand 0.5 makes the jitter factor exactly 1.
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond}
	got := clock.Slept()
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("waits %v, want %v", got, want)
	}
	// Jitter spreads the wait between half and one and a half times.
	r := Retry{Backoff: time.Second, MaxBackoff: time.Minute}
	if lo, hi := r.backoff(1, func() float64 { return 0 }), r.backoff(1, func() float64 { return 0.999 }); lo != 500*time.Millisecond || hi < 1490*time.Millisecond {
		t.Fatalf("jitter range %v–%v", lo, hi)
	}
}

func TestDefaultMaxAttemptsTriesEachOncePlusOne(t *testing.T) {
	all := func(n int) []Result {
		out := make([]Result, n)
		for i := range out {
			out[i] = fail(status(503))
		}
		return out
	}
	sc := &script{answers: map[string][]Result{"a": all(5), "b": all(5), "c": all(5)}}
	rep, _ := runOn(t, newFakeClock(), []Spec{{Name: "m", Strategy: RoundRobin, Targets: targets(3)}}, sc, Runner{})
	if rep.Attempts != 4 || len(sc.calls) != 4 {
		t.Fatalf("attempts %d calls %v", rep.Attempts, sc.calls)
	}
}

func TestRetryAfterHonouredOrMovedOn(t *testing.T) {
	limited := status(429)
	limited.RetryAfter = 2 * time.Second
	// One deployment: the wait fits in max_backoff, so it is waited out.
	clock := newFakeClock()
	sc := &script{answers: map[string][]Result{"a": {fail(limited)}}}
	rep, _ := runOn(t, clock, []Spec{{Name: "m", Targets: targets(1), Retry: Retry{MaxBackoff: 5 * time.Second}}}, sc, Runner{})
	if rep.Err != nil || rep.Attempts != 2 {
		t.Fatalf("report %+v", rep)
	}
	var waited time.Duration
	for _, d := range clock.Slept() {
		waited += d
	}
	if waited < 2*time.Second || waited > 2100*time.Millisecond {
		t.Fatalf("waited %v, want the 2s Retry-After", clock.Slept())
	}

	// Longer than max_backoff: no wait, the client gets the 429 and its Retry-After.
	long := status(429)
	long.RetryAfter = 30 * time.Second
	clock = newFakeClock()
	sc = &script{answers: map[string][]Result{"a": {fail(long)}}}
	rep, _ = runOn(t, clock, []Spec{{Name: "m", Targets: targets(1)}}, sc, Runner{})
	if rep.Err == nil || rep.Err.Status != 429 || rep.Err.RetryAfter != 30*time.Second || len(sc.calls) != 1 {
		t.Fatalf("report %+v calls %v", rep, sc.calls)
	}
	for _, d := range clock.Slept() {
		if d >= 5*time.Second {
			t.Fatalf("waited %v for a Retry-After beyond max_backoff", d)
		}
	}

	// Longer than what is left of the total timeout: same.
	clock = newFakeClock()
	sc = &script{answers: map[string][]Result{"a": {fail(limited)}}}
	rep, _ = runOn(t, clock, []Spec{{Name: "m", Targets: targets(1), Timeouts: provider.Timeouts{Total: time.Second}}}, sc, Runner{})
	if rep.Err == nil || rep.Err.Status != 429 || len(sc.calls) != 1 {
		t.Fatalf("report %+v calls %v", rep, sc.calls)
	}
}

func TestCancelDuringBackoffStopsAtOnce(t *testing.T) {
	clock := newFakeClock()
	clock.block = true
	clock.sleeping = make(chan time.Duration, 1)
	pool := NewPool(PoolOptions{Clock: clock})
	g := pool.Group(Spec{Name: "m", Targets: targets(1), Retry: Retry{Backoff: time.Hour, MaxBackoff: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Report, 1)
	tries := 0
	go func() {
		done <- (&Runner{Try: func(context.Context, Attempt) Result { tries++; return fail(status(503)) }}).Run(ctx, g)
	}()
	<-clock.sleeping
	cancel()
	select {
	case rep := <-done:
		if rep.Err == nil || rep.Err.Kind != llm.KindCanceled || tries != 1 {
			t.Fatalf("report %+v after %d tries", rep, tries)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the loop kept waiting after the client left")
	}
	if l := g.Members()[0].InFlightTokens(); l != 0 {
		t.Fatalf("%d tokens still held", l)
	}
}

func TestFallbackGroups(t *testing.T) {
	specs := []Spec{
		{Name: "primary", Targets: targets(2), Fallbacks: []string{"backup", "missing"}},
		{Name: "backup", Targets: []*provider.Deployment{{Provider: "z"}}},
	}
	sc := &script{answers: map[string][]Result{"a": {fail(status(503))}, "b": {fail(status(502))}}}
	rep, _ := runOn(t, newFakeClock(), specs, sc, Runner{})
	if calls(sc) != "a,b,z" || rep.Err != nil || rep.Answered.Group.Name != "backup" || rep.Answered.N != 3 {
		t.Fatalf("calls %s report %+v", calls(sc), rep)
	}
	// A client error does not fall back.
	sc = &script{answers: map[string][]Result{"a": {fail(status(400))}}}
	rep, _ = runOn(t, newFakeClock(), specs, sc, Runner{})
	if calls(sc) != "a" || rep.Err.Status != 400 {
		t.Fatalf("calls %s", calls(sc))
	}
}

func TestContextWindowFallback(t *testing.T) {
	specs := []Spec{
		{Name: "small", Targets: targets(2), Fallbacks: []string{"other"}, ContextFallbacks: []string{"long"}, MaxContext: 1000},
		{Name: "other", Targets: []*provider.Deployment{{Provider: "o"}}},
		{Name: "long", Targets: []*provider.Deployment{{Provider: "l"}}},
	}
	// The provider says the prompt is too long: no other deployment of the
	// model, no ordinary fallback; the long-context model answers.
	tooLong := &llm.Error{Kind: llm.KindUpstreamStatus, Status: 400, Code: "context_length_exceeded",
		Message: "This model's maximum context length is 8192 tokens."}
	sc := &script{answers: map[string][]Result{"a": {fail(tooLong)}}}
	rep, _ := runOn(t, newFakeClock(), specs, sc, Runner{PromptTokens: 10})
	if calls(sc) != "a,l" || rep.Err != nil || rep.Answered.Group.Name != "long" {
		t.Fatalf("calls %s report %+v", calls(sc), rep)
	}
	// The estimate alone exceeds max_context: the small model is not called.
	sc = &script{}
	rep, _ = runOn(t, newFakeClock(), specs, sc, Runner{PromptTokens: 900, MaxTokens: 200})
	if calls(sc) != "l" || rep.Err != nil {
		t.Fatalf("calls %s report %+v", calls(sc), rep)
	}
	// Without a context fallback the client is told why.
	rep, _ = runOn(t, newFakeClock(), specs[:1], &script{}, Runner{PromptTokens: 5000})
	if rep.Err == nil || rep.Err.Status != 400 || rep.Err.Code != "context_length_exceeded" || rep.Attempts != 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestContextTooLongRecognisesProviders(t *testing.T) {
	yes := []*llm.Error{
		{Kind: llm.KindUpstreamStatus, Status: 400, Code: "context_length_exceeded"},
		{Kind: llm.KindUpstreamStatus, Status: 400, Message: "prompt is too long: 210000 tokens > 200000 maximum"},
		{Kind: llm.KindUpstreamStatus, Status: 400, Message: "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."},
		{Kind: llm.KindUpstreamStatus, Status: 400, Message: "Input is too long for requested model."},
		{Kind: llm.KindUpstreamStatus, Status: 400, Code: "exceed_context_size_error", Message: "the request exceeds the available context size"},
		{Kind: llm.KindUpstreamStatus, Status: 400, Message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens"},
	}
	for _, e := range yes {
		if !ContextTooLong(e) {
			t.Errorf("not recognised: %+v", e)
		}
	}
	no := []*llm.Error{
		{Kind: llm.KindUpstreamStatus, Status: 429, Message: "Rate limit reached for tokens per min; maximum context length"},
		{Kind: llm.KindUpstreamStatus, Status: 400, Message: "Invalid value for 'temperature'"},
		{Kind: llm.KindUpstreamTimeout, Status: 504, Message: "prompt is too long"},
	}
	for _, e := range no {
		if ContextTooLong(e) {
			t.Errorf("misread as too long: %+v", e)
		}
	}
}

func TestOnlyAnsweredAttemptIsReported(t *testing.T) {
	var seen []Outcome
	sc := &script{answers: map[string][]Result{"a": {fail(status(503))}}}
	rep, _ := runOn(t, newFakeClock(), []Spec{{Name: "m", Targets: targets(2)}}, sc,
		Runner{OnAttempt: func(a Attempt, r Result, o Outcome) { seen = append(seen, o) }})
	if rep.Attempts != 2 || rep.Answered.N != 2 || rep.Answered.Deployment.Provider != "b" || rep.Last.N != 2 {
		t.Fatalf("report %+v", rep)
	}
	if len(seen) != 2 || seen[0] != Failure || seen[1] != Success {
		t.Fatalf("outcomes %v", seen)
	}
	// The answering deployment's names, made once with its backend.
	d := rep.Answered.Deployment
	if n := rep.Answered.Names(); n == nil || *n != newNames(d) || n.Checked(d).Joined(d) != d.Provider+"/"+d.Model {
		t.Errorf("names %+v", n)
	}
	if (Attempt{}).Names() != nil {
		t.Error("an attempt without a pool has names")
	}
}

// A deployment Allow refuses is never called: not in the first round, not
// in retry rounds or as a last resort, not as a fallback.
func TestDisallowedDeploymentsAreSkipped(t *testing.T) {
	only := func(names ...string) func(*provider.Deployment) bool {
		return func(d *provider.Deployment) bool {
			for _, n := range names {
				if d.Provider == n {
					return true
				}
			}
			return false
		}
	}
	specs := []Spec{
		{Name: "primary", Strategy: Failover, Targets: targets(3), Fallbacks: []string{"backup", "other"},
			Retry: Retry{MaxAttempts: 6, Backoff: time.Millisecond}},
		{Name: "backup", Targets: []*provider.Deployment{{Provider: "y"}}},
		{Name: "other", Targets: []*provider.Deployment{{Provider: "z"}}},
	}
	cases := []struct {
		name    string
		allow   []string
		answers map[string][]Result
		calls   string
		status  int // 0: answered
	}{
		{"first skipped", []string{"b", "c", "z"}, nil, "b", 0},
		{"failover skips the refused one", []string{"a", "c", "z"}, map[string][]Result{"a": {fail(status(503))}}, "a,c", 0},
		{"fallback to a refused model skipped", []string{"a", "z"}, map[string][]Result{"a": {fail(status(503))}}, "a,z", 0},
		{"retry rounds stay on the allowed", []string{"b"},
			map[string][]Result{"b": {fail(status(500)), fail(status(500)), fail(status(500)), fail(status(500)), fail(status(500)), fail(status(500))}},
			"b,b,b,b,b,b", 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep, sc := runOn(t, newFakeClock(), specs, &script{answers: c.answers}, Runner{Allow: only(c.allow...)})
			if calls(sc) != c.calls {
				t.Fatalf("calls %s, want %s", calls(sc), c.calls)
			}
			if c.status == 0 && rep.Err != nil {
				t.Fatalf("err %v, want an answer", rep.Err)
			}
			if c.status != 0 && (rep.Err == nil || rep.Err.Status != c.status) {
				t.Fatalf("err %v, want status %d", rep.Err, c.status)
			}
		})
	}
}

func TestReachable(t *testing.T) {
	pool := NewPool(PoolOptions{Clock: newFakeClock()})
	primary := pool.Group(Spec{Name: "primary", Targets: targets(2), ContextFallbacks: []string{"long"}})
	long := pool.Group(Spec{Name: "long", Targets: []*provider.Deployment{{Provider: "z"}}})
	empty := pool.Group(Spec{Name: "empty", Mode: ModeLocalOnly, Targets: targets(1)})
	table := NewTable([]*Group{primary, long, empty})
	allow := func(name string) func(*provider.Deployment) bool {
		return func(d *provider.Deployment) bool { return d.Provider == name }
	}
	cases := []struct {
		name  string
		g     *Group
		allow func(*provider.Deployment) bool
		want  bool
	}{
		{"no restriction", primary, nil, true},
		{"a target allowed", primary, allow("b"), true},
		{"only a context fallback allowed", primary, allow("z"), true},
		{"nothing allowed", primary, allow("q"), false},
		{"no deployment at all", empty, allow("q"), true},
	}
	for _, c := range cases {
		r := Runner{Table: table, Allow: c.allow}
		if got := r.Reachable(c.g); got != c.want {
			t.Errorf("%s: Reachable = %v, want %v", c.name, got, c.want)
		}
	}
}

// An attempt left open (a stream relayed after Try returned) ends the run
// as an answer but stays in flight until Close: least-requests and
// least-tokens must go on seeing the stream, and OnAttempt must see how
// it finally ended, once.
func TestOpenAttemptStaysInFlightUntilClose(t *testing.T) {
	pool := NewPool(PoolOptions{Clock: newFakeClock()})
	g := pool.Group(Spec{Name: "m", Targets: targets(2)})
	var seen []Outcome
	r := Runner{
		MaxTokens: 100,
		Try:       func(context.Context, Attempt) Result { return Result{Open: true, Started: true} },
		OnAttempt: func(_ Attempt, _ Result, o Outcome) { seen = append(seen, o) },
	}
	rep := r.Run(context.Background(), g)
	if rep.Err != nil || rep.Attempts != 1 || rep.Answered.N != 1 || !rep.Open() {
		t.Fatalf("report %+v open %v", rep, rep.Open())
	}
	b := rep.Answered.lease.Backend
	if b.InFlightRequests() != 1 || b.InFlightTokens() != 100 || len(seen) != 0 {
		t.Fatalf("open attempt: %d requests, %d tokens in flight, outcomes %v", b.InFlightRequests(), b.InFlightTokens(), seen)
	}
	broken := status(502)
	rep.Close(Result{Err: broken, FirstByte: time.Millisecond})
	rep.Close(Result{}) // a second Close changes nothing
	if b.InFlightRequests() != 0 || b.InFlightTokens() != 0 {
		t.Fatalf("after Close: %d requests, %d tokens in flight", b.InFlightRequests(), b.InFlightTokens())
	}
	if len(seen) != 1 || seen[0] != Failure || rep.Err != broken || rep.Open() {
		t.Fatalf("after Close: outcomes %v, err %v, open %v", seen, rep.Err, rep.Open())
	}
}

// Open with an error is an ordinary failure: the run moves on.
func TestOpenWithAnErrorIsAFailure(t *testing.T) {
	sc := &script{answers: map[string][]Result{"a": {{Err: status(503), Open: true}}}}
	rep, _ := runOn(t, newFakeClock(), []Spec{{Name: "m", Strategy: Failover, Targets: targets(2)}}, sc, Runner{})
	if calls(sc) != "a,b" || rep.Err != nil || rep.Open() {
		t.Fatalf("calls %s report %+v", calls(sc), rep)
	}
}
