package route

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/provider"
)

// TestLeastTokensConcurrentPicks holds 600 concurrent picks of equal cost
// on three deployments: if two picks ever saw the same old totals, the
// counts would come out uneven. Run with -race.
func TestLeastTokensConcurrentPicks(t *testing.T) {
	pool := NewPool(PoolOptions{})
	g := pool.Group(Spec{Name: "m", Strategy: LeastTokens, Targets: targets(3)})
	const n, cost = 600, 100
	leases := make(chan *Lease, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, ok := g.Pick(nil, cost, true)
			if !ok {
				t.Error("nothing picked")
				return
			}
			leases <- l
		}()
	}
	wg.Wait()
	close(leases)
	held := map[string]int{}
	var all []*Lease
	for l := range leases {
		held[l.Deployment.Provider]++
		all = append(all, l)
	}
	for _, m := range g.Members() {
		if held[m.Deployment.Provider] != n/3 || m.InFlightTokens() != n/3*cost || m.InFlightRequests() != n/3 {
			t.Fatalf("uneven under concurrency: %v; %s holds %d tokens", held, m.Deployment.Provider, m.InFlightTokens())
		}
	}
	for _, l := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Done(Success, time.Millisecond, 0)
			l.Done(Success, time.Millisecond, 0) // a second Done is a no-op
		}()
	}
	wg.Wait()
	for _, m := range g.Members() {
		if m.InFlightTokens() != 0 || m.InFlightRequests() != 0 {
			t.Fatalf("%s still holds %d tokens after every release", m.Deployment.Provider, m.InFlightTokens())
		}
	}
}

// TestLeastTokensWeighsBigPrompts: a deployment busy with one long prompt
// gets no new request until the others carry as much.
func TestLeastTokensWeighsBigPrompts(t *testing.T) {
	pool := NewPool(PoolOptions{})
	g := pool.Group(Spec{Name: "m", Strategy: LeastTokens, Targets: targets(2)})
	big, _ := g.Pick(nil, 4000, true)
	got := map[string]int{}
	var small []*Lease
	for range 10 {
		l, _ := g.Pick(nil, 300, true)
		got[l.Deployment.Provider]++
		small = append(small, l)
	}
	if got[big.Deployment.Provider] != 0 {
		t.Fatalf("small requests joined the long prompt: %v", got)
	}
	for _, l := range small {
		l.Done(Success, 0, 0)
	}
	big.Done(Success, 0, 0)
}

func TestLeastTokensFoldsInLoadSignal(t *testing.T) {
	pool := NewPool(PoolOptions{})
	g := pool.Group(Spec{Name: "m", Strategy: LeastTokens, Targets: targets(2)})
	// a's server reports a queue the gateway did not cause (other clients).
	pool.SetLoadSignal("a", StaticLoad{Running: 2, Waiting: 3})
	for range 4 {
		l, _ := g.Pick(nil, 100, true)
		if l.Deployment.Provider != "b" {
			t.Fatalf("picked the server that reports a queue")
		}
		defer l.Done(Success, 0, 0)
	}
	// KV-cache pressure weighs too.
	pool2 := NewPool(PoolOptions{})
	g2 := pool2.Group(Spec{Name: "m", Strategy: LeastTokens, Targets: targets(2)})
	pool2.SetLoadSignal("a", StaticLoad{KVCache: 0.9})
	first, _ := g2.Pick(nil, 100, true)
	defer first.Done(Success, 0, 0)
	second, _ := g2.Pick(nil, 100, true)
	defer second.Done(Success, 0, 0)
	third, _ := g2.Pick(nil, 100, true)
	defer third.Done(Success, 0, 0)
	if third.Deployment.Provider != "b" || first.Deployment.Provider == second.Deployment.Provider {
		t.Fatalf("picks %s %s %s: the deployment with a full KV cache should take less", first.Deployment.Provider, second.Deployment.Provider, third.Deployment.Provider)
	}
}

func TestLeastLatencyPrefersFastAndRetriesRecovered(t *testing.T) {
	clock := newFakeClock()
	pool := NewPool(PoolOptions{Clock: clock, Explore: -1})
	g := pool.Group(Spec{Name: "m", Strategy: LeastLatency, Targets: targets(2)})
	a, b := g.Members()[0].Backend, g.Members()[1].Backend
	feed := func(be *Backend, d time.Duration) {
		be.requests.Add(1)
		(&Lease{Backend: be, Deployment: be.Deployment}).Done(Success, d, 0)
	}
	// Unmeasured deployments are tried first.
	if got := pickOnce(t, g, Neutral); got != "a" {
		t.Fatalf("first pick %s", got)
	}
	feed(a, 900*time.Millisecond)
	if l, _ := g.Pick(nil, 1, true); l.Deployment.Provider != "b" {
		t.Fatal("unmeasured b not tried")
	} else {
		l.Done(Neutral, 0, 0)
	}
	feed(b, 100*time.Millisecond)
	for range 20 {
		if got := pickOnce(t, g, Neutral); got != "b" {
			t.Fatal("slow deployment picked")
		}
	}
	// b keeps being fed; a's last sample goes stale and it is measured again.
	for range 4 {
		clock.Advance(10 * time.Second)
		feed(b, 100*time.Millisecond)
	}
	if got := pickOnce(t, g, Neutral); got != "a" {
		t.Fatalf("stale deployment not retried: picked %s", got)
	}
	feed(a, 50*time.Millisecond)
	if got := pickOnce(t, g, Neutral); got != "a" {
		t.Fatal("the recovered deployment is now the fastest")
	}
}

func TestLeastLatencyExplores(t *testing.T) {
	pool := NewPool(PoolOptions{Explore: 0.2})
	g := pool.Group(Spec{Name: "m", Strategy: LeastLatency, Targets: targets(2)})
	for _, m := range g.Members() {
		d := 10 * time.Millisecond
		if m.Deployment.Provider == "b" {
			d = time.Second
		}
		m.requests.Add(1)
		(&Lease{Backend: m.Backend, Deployment: m.Deployment}).Done(Success, d, 0)
	}
	got := count(g, 5000)
	if got["b"] < 250 || got["b"] > 750 {
		t.Fatalf("exploration share off: %v (want ~10%% to b)", got)
	}
}

func TestRoutingModes(t *testing.T) {
	ds := []*provider.Deployment{
		{Provider: "cloud1"}, {Provider: "box1", Local: true}, {Provider: "cloud2"}, {Provider: "box2", Local: true},
	}
	cases := []struct {
		mode  string
		order []string
	}{
		{ModeAny, []string{"cloud1", "box1", "cloud2", "box2"}},
		{ModeLocalFirst, []string{"box1", "box2", "cloud1", "cloud2"}},
		{ModeCloudFirst, []string{"cloud1", "cloud2", "box1", "box2"}},
		{ModeLocalOnly, []string{"box1", "box2"}},
		{ModeCloudOnly, []string{"cloud1", "cloud2"}},
	}
	for _, c := range cases {
		g := NewPool(PoolOptions{}).Group(Spec{Name: "m", Strategy: Failover, Targets: ds, Mode: c.mode})
		// Each pick excludes what was tried, like the attempt loop does.
		var tried []*Backend
		var got []string
		for {
			l, ok := g.Pick(tried, 1, true)
			if !ok {
				break
			}
			l.Done(Failure, 0, 0)
			tried = append(tried, l.Backend)
			got = append(got, l.Deployment.Provider)
		}
		if len(got) != len(c.order) {
			t.Fatalf("%s: order %v, want %v", c.mode, got, c.order)
		}
		for i := range got {
			if got[i] != c.order[i] {
				t.Fatalf("%s: order %v, want %v", c.mode, got, c.order)
			}
		}
	}
	// local_first with round-robin spreads over the local tier only.
	g := NewPool(PoolOptions{}).Group(Spec{Name: "m", Strategy: RoundRobin, Targets: ds, Mode: ModeLocalFirst})
	if got := count(g, 10); got["box1"] != 5 || got["box2"] != 5 {
		t.Fatalf("local_first round robin: %v", got)
	}
}

func TestSharedBackendAcrossGroups(t *testing.T) {
	pool := NewPool(PoolOptions{Breaker: BreakerConfig{Failures: 1, Cooldown: time.Hour}})
	d := &provider.Deployment{Provider: "p", Model: "x"}
	same := &provider.Deployment{Provider: "p", Model: "x"}
	g1 := pool.Group(Spec{Name: "one", Targets: []*provider.Deployment{d, {Provider: "q", Model: "x"}}})
	g2 := pool.Group(Spec{Name: "two", Targets: []*provider.Deployment{same, {Provider: "r", Model: "x"}}})
	pickOnce(t, g1, Failure)
	if got := pickOnce(t, g2, Success); got != "r" {
		t.Fatalf("a breaker opened by one model's traffic did not protect the other: picked %s", got)
	}
}

// leastRequests is what a benchmark plugs in to compare with least-tokens.
type leastRequests struct{}

func (leastRequests) Select(cands []Member, _ int64) int {
	best := 0
	for i, m := range cands {
		if m.InFlightRequests() < cands[best].InFlightRequests() {
			best = i
		}
	}
	return best
}

func TestCustomSelector(t *testing.T) {
	g := NewPool(PoolOptions{}).Group(Spec{Name: "m", Targets: targets(2), Selector: leastRequests{}})
	first, _ := g.Pick(nil, 5000, true)
	second, _ := g.Pick(nil, 1, true)
	if first.Deployment == second.Deployment {
		t.Fatal("custom selector not used")
	}
	first.Done(Success, 0, 0)
	second.Done(Success, 0, 0)
}

// TestLeastRequestsCountsRequestsNotTokens: least-requests balances the
// number of requests in flight and is blind to their size, which is what
// least-tokens is measured against.
func TestLeastRequestsCountsRequestsNotTokens(t *testing.T) {
	g := NewPool(PoolOptions{}).Group(Spec{Name: "m", Strategy: LeastRequests, Targets: targets(2)})
	big, _ := g.Pick(nil, 4000, true)
	small, _ := g.Pick(nil, 10, true)
	if big.Deployment == small.Deployment {
		t.Fatal("second request joined the busy deployment")
	}
	// One request each: a tie, whatever the tokens; ties take turns.
	got := map[string]int{}
	var more []*Lease
	for range 4 {
		l, _ := g.Pick(nil, 10, true)
		got[l.Deployment.Provider]++
		more = append(more, l)
	}
	if got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("requests not spread by count: %v", got)
	}
	for _, l := range append(more, big, small) {
		l.Done(Success, 0, 0)
	}
	for _, m := range g.Members() {
		if m.InFlightRequests() != 0 {
			t.Fatalf("%s still counts %d requests", m.Deployment.Provider, m.InFlightRequests())
		}
	}
}

// TestTokenScoreCountsOnlyForeignLoad: the requests a server reports,
// running or queued, include the gateway's own; only those beyond them
// add load, priced at the gateway's average request.
func TestTokenScoreCountsOnlyForeignLoad(t *testing.T) {
	for _, c := range []struct {
		load Load
		want float64
	}{
		{Load{Running: 2, Waiting: 2}, 400 + 100},               // all four are the gateway's, two of them queued
		{Load{Running: 2, Waiting: 5}, 400 + 100 + 3*100},       // three more queued from elsewhere
		{Load{Running: 1}, 400 + 100},                           // a stale report below the gateway's count
		{Load{Running: 2, Waiting: 2, KVCache: 0.5}, 500 * 1.5}, // KV-cache use scales it
	} {
		b := &Backend{signal: StaticLoad(c.load)}
		b.tokens.Store(400)
		b.requests.Store(4)
		if got := tokenScore(b, 100); got != c.want {
			t.Errorf("%+v: score %v, want %v", c.load, got, c.want)
		}
	}
}

// TestRelayedTokensLowerInFlight: a streaming attempt's relayed chunks
// take its reply tokens off the deployment's in-flight count as they go
// out — never its prompt, never more than it reserved — so least-tokens
// sends the next request to a deployment whose stream is nearly done;
// the attempt's end gives back exactly the rest.
func TestRelayedTokensLowerInFlight(t *testing.T) {
	pool := NewPool(PoolOptions{})
	g := pool.Group(Spec{Name: "m", Strategy: LeastTokens, Targets: targets(2)})
	other := g.Members()[1].Backend
	other.tokens.Add(700) // another request in flight on b
	defer other.tokens.Add(-700)
	var during []int64
	var next string
	r := Runner{PromptTokens: 100, MaxTokens: 900, Try: func(_ context.Context, a Attempt) Result {
		be := g.Members()[0].Backend
		if a.Deployment != be.Deployment {
			t.Fatalf("first pick %s", a.Deployment.Provider)
		}
		during = append(during, be.InFlightTokens())
		a.Relayed(250)
		during = append(during, be.InFlightTokens())
		// 250 relayed: a holds 750, b 700; 500 more and a holds 250.
		if l, _ := g.Pick(nil, 10, true); l != nil {
			next = l.Deployment.Provider + ","
			l.Done(Success, 0, 0)
		}
		a.Relayed(500)
		during = append(during, be.InFlightTokens())
		if l, _ := g.Pick(nil, 10, true); l != nil {
			next += l.Deployment.Provider
			l.Done(Success, 0, 0)
		}
		a.Relayed(10_000) // more chunks than max_tokens: the prompt's share stays
		during = append(during, be.InFlightTokens())
		return Result{}
	}}
	r.Run(context.Background(), g)
	if want := []int64{1000, 750, 250, 100}; !slices.Equal(during, want) {
		t.Fatalf("in-flight tokens while streaming %v, want %v", during, want)
	}
	if next != "b,a" {
		t.Fatalf("picks while streaming %q, want b then a", next)
	}
	if n := g.Members()[0].Backend.InFlightTokens(); n != 0 {
		t.Fatalf("after the attempt %d tokens still in flight", n)
	}
}
