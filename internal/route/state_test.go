package route

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/provider"
)

// More of Snapshot (snapshot_test.go has the breaker opening and the
// requests in flight): the breaker's probe, health checks, Retry-After,
// discovered models and State.

// deploymentOf finds a provider's deployment in a model's state.
func deploymentOf(t *testing.T, s ModelState, providerName string) DeploymentState {
	t.Helper()
	for _, d := range s.Deployments {
		if d.Provider == providerName {
			return d
		}
	}
	t.Fatalf("no deployment of %q in %+v", providerName, s)
	return DeploymentState{}
}

func TestSnapshotThroughTheProbe(t *testing.T) {
	clock := newFakeClock()
	pool := NewPool(PoolOptions{Clock: clock, Breaker: BreakerConfig{Failures: 1, Cooldown: 30 * time.Second}})
	g := pool.Group(Spec{Name: "m", Strategy: Failover, Targets: targets(2)})
	table := NewTable([]*Group{g})

	pickOnce(t, g, Failure)
	opened := clock.Now()
	clock.Advance(30 * time.Second)
	a := deploymentOf(t, table.Snapshot()[0], "a")
	if a.Breaker != Open || !a.BreakerSince.Equal(opened) || !a.BreakerUntil.Equal(opened.Add(30*time.Second)) {
		t.Fatalf("open, its cooldown just over: %+v", a)
	}

	probe, _ := g.Pick(nil, 10, true)
	if probe.Deployment.Provider != "a" {
		t.Fatalf("the probe went to %s", probe.Deployment.Provider)
	}
	a = deploymentOf(t, table.Snapshot()[0], "a")
	if a.Breaker != HalfOpen || !a.BreakerSince.Equal(opened) || !a.BreakerUntil.IsZero() || a.InFlightRequests != 1 {
		t.Fatalf("during the probe: %+v", a)
	}
	probe.Done(Success, 5*time.Millisecond, 0)
	a = deploymentOf(t, table.Snapshot()[0], "a")
	if a.Breaker != Closed || !a.BreakerSince.IsZero() || !a.BreakerUntil.IsZero() || a.InFlightRequests != 0 {
		t.Fatalf("after the probe answered: %+v", a)
	}
}

func TestSnapshotHealthAndRetryAfter(t *testing.T) {
	clock := newFakeClock()
	pool := NewPool(PoolOptions{Clock: clock})
	g := pool.Group(Spec{Name: "m", Strategy: Failover, Targets: targets(3)})
	table := NewTable([]*Group{g})
	pool.SetDown("a", true)
	pool.SetDown("b", false)

	s := table.Snapshot()[0]
	health := func(d DeploymentState) [2]bool { return [2]bool{d.HealthChecked, d.Down} }
	if got := [][2]bool{health(s.Deployments[0]), health(s.Deployments[1]), health(s.Deployments[2])}; !cmp.Equal(got,
		[][2]bool{{true, true}, {true, false}, {false, false}}) {
		t.Fatalf("checked and down of a (down), b (up), c (no check): %v", got)
	}

	l, _ := g.Pick(nil, 0, false)
	if l.Deployment.Provider != "b" {
		t.Fatalf("picked %s past a provider that is down", l.Deployment.Provider)
	}
	l.Done(Failure, 0, 20*time.Second)
	if b := deploymentOf(t, table.Snapshot()[0], "b"); !b.CoolingUntil.Equal(clock.Now().Add(20 * time.Second)) {
		t.Fatalf("b after a Retry-After: %+v", b)
	}
	clock.Advance(20 * time.Second)
	if b := deploymentOf(t, table.Snapshot()[0], "b"); !b.CoolingUntil.IsZero() {
		t.Fatalf("b once the Retry-After ran out: %+v", b)
	}

	// A model found later on a provider that is down starts down.
	late := pool.Group(Spec{Name: "late", Strategy: Failover, Targets: []*provider.Deployment{{Provider: "a", Model: "new"}}})
	if _, ok := late.Pick(nil, 0, false); ok {
		t.Fatal("a new deployment of a down provider was picked")
	}
	if d := NewTable([]*Group{late}).Snapshot()[0].Deployments[0]; !d.Down || !d.HealthChecked {
		t.Fatalf("late: %+v", d)
	}
}

// TestHealthCheckReportsItsFirstResult: the pool learns of a passing
// check at once (not only of a change), so a snapshot tells a provider
// that passes its checks from one that has none.
func TestHealthCheckReportsItsFirstResult(t *testing.T) {
	pool := NewPool(PoolOptions{})
	g := pool.Group(Spec{Name: "m", Strategy: Failover, Targets: targets(1)})
	table := NewTable([]*Group{g})
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	var changes []bool
	h := &HealthCheck{Pool: pool, Provider: "a", URL: srv.URL, OnChange: func(down bool, _ error) { changes = append(changes, down) }}
	state := func() [2]bool {
		d := table.Snapshot()[0].Deployments[0]
		return [2]bool{d.HealthChecked, d.Down}
	}
	if got := state(); got != [2]bool{false, false} {
		t.Fatalf("before any check: checked, down = %v", got)
	}
	for i, want := range [][2]bool{{true, false}, {true, false}, {true, true}} {
		h.Check(context.Background())
		if got := state(); got != want {
			t.Fatalf("after check %d: checked, down = %v, want %v", i+1, got, want)
		}
		failing.Store(true) // the second and third fail: two in a row take it down
	}
	if len(changes) != 1 || !changes[0] {
		t.Fatalf("OnChange heard %v, want only the fall", changes)
	}
}

func TestSnapshotOfDiscoveredModels(t *testing.T) {
	pool := NewPool(PoolOptions{})
	box := func(name, model string) *Group {
		return pool.Group(Spec{Name: name, Strategy: Failover, Mode: ModeAny,
			Targets: []*provider.Deployment{{Provider: "box", Type: "ollama", Model: model, Local: true}}})
	}
	chat := pool.Group(Spec{Name: "chat", Strategy: Failover, Mode: ModeAny, Targets: targets(1)})
	table := NewTable([]*Group{chat})
	table.SetDiscovered(NewDiscovered([]*Group{box("qwen3:latest", "qwen3:latest"), box("chat", "chat")},
		[]*Group{box("qwen3", "qwen3:latest")}))

	var names []string
	for _, m := range table.Snapshot() {
		names = append(names, m.Name)
		if m.Discovered != (m.Name != "chat") {
			t.Errorf("%s: discovered %v", m.Name, m.Discovered)
		}
	}
	if !cmp.Equal(names, []string{"chat", "qwen3:latest"}) {
		t.Fatalf("listed %v: want the configured model, then the discovered one it does not shadow (aliases unlisted)", names)
	}
	for name, want := range map[string]struct {
		discovered bool
		provider   string
	}{"chat": {false, "a"}, "qwen3": {true, "box"}, "qwen3:latest": {true, "box"}} {
		s, ok := table.State(name)
		if !ok || s.Name != name || s.Discovered != want.discovered || len(s.Deployments) != 1 || s.Deployments[0].Provider != want.provider {
			t.Errorf("State(%q) = %+v, %v", name, s, ok)
		}
	}
	if _, ok := table.State("nope"); ok {
		t.Error("State(nope) found a model")
	}
}

// TestSnapshotRacesPicks takes snapshots beside picks and health
// changes; -race finds any state read without its lock.
func TestSnapshotRacesPicks(t *testing.T) {
	pool := NewPool(PoolOptions{Breaker: BreakerConfig{Failures: 2, Window: time.Second, ErrorRate: 0.5, MinRequests: 1}})
	g := pool.Group(Spec{Name: "m", Strategy: LeastLatency, Targets: targets(3)})
	table := NewTable([]*Group{g})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				if l, ok := g.Pick(nil, 10, true); ok {
					l.Done(Outcome(1+(i+w)%2), time.Millisecond, 0)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 500 {
			pool.SetDown("c", i%2 == 0)
		}
	})
	for range 200 {
		if s := table.Snapshot(); len(s) != 1 || len(s[0].Deployments) != 3 {
			t.Fatalf("snapshot %+v", s)
		}
	}
	wg.Wait()
	for _, d := range table.Snapshot()[0].Deployments {
		if d.InFlightRequests != 0 || d.InFlightTokens != 0 {
			t.Fatalf("in flight after every lease ended: %+v", d)
		}
	}
}
