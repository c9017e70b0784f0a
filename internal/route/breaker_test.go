package route

import (
	"testing"
	"time"

	"gatehouse/internal/provider"
)

func breakerPool(clock *fakeClock, changes *[]string) *Pool {
	return NewPool(PoolOptions{
		Clock:   clock,
		Breaker: BreakerConfig{Failures: 3, Cooldown: 30 * time.Second},
		OnBreaker: func(d *provider.Deployment, s BreakerState) {
			*changes = append(*changes, d.Provider+":"+s.String())
		},
	})
}

// pickOnce picks, finishes the lease with o and returns the provider.
func pickOnce(t *testing.T, g *Group, o Outcome) string {
	t.Helper()
	l, ok := g.Pick(nil, 10, true)
	if !ok {
		t.Fatal("nothing picked")
	}
	l.Done(o, time.Millisecond, 0)
	return l.Deployment.Provider
}

func TestBreakerOpensSkipsProbesAndCloses(t *testing.T) {
	clock := newFakeClock()
	var changes []string
	pool := breakerPool(clock, &changes)
	g := pool.Group(Spec{Name: "m", Strategy: Failover, Targets: targets(2)})
	a := g.Members()[0].Backend

	for range 3 {
		if got := pickOnce(t, g, Failure); got != "a" {
			t.Fatalf("picked %s before the breaker opened", got)
		}
	}
	if a.Breaker() != Open {
		t.Fatalf("breaker %v after 3 failures in a row", a.Breaker())
	}
	for range 5 {
		if got := pickOnce(t, g, Success); got != "b" {
			t.Fatalf("open deployment picked: %s", got)
		}
	}

	// After the cooldown exactly one probe goes to a; concurrent picks go on to b.
	clock.Advance(30 * time.Second)
	probe, _ := g.Pick(nil, 10, true)
	if probe.Deployment.Provider != "a" || a.Breaker() != HalfOpen {
		t.Fatalf("probe went to %s, breaker %v", probe.Deployment.Provider, a.Breaker())
	}
	if got := pickOnce(t, g, Success); got != "b" {
		t.Fatalf("a second request went to the half-open deployment (%s)", got)
	}
	probe.Done(Failure, 0, 0)
	if a.Breaker() != Open {
		t.Fatalf("failed probe left the breaker %v", a.Breaker())
	}
	clock.Advance(30 * time.Second)
	if got := pickOnce(t, g, Success); got != "a" || a.Breaker() != Closed {
		t.Fatalf("successful probe: picked %s, breaker %v", got, a.Breaker())
	}
	want := []string{"a:open", "a:half_open", "a:open", "a:half_open", "a:closed"}
	if len(changes) != len(want) {
		t.Fatalf("state changes %v, want %v", changes, want)
	}
	for i := range want {
		if changes[i] != want[i] {
			t.Fatalf("state changes %v, want %v", changes, want)
		}
	}
}

func TestBreakerErrorRate(t *testing.T) {
	clock := newFakeClock()
	pool := NewPool(PoolOptions{Clock: clock, Breaker: BreakerConfig{ErrorRate: 0.5, MinRequests: 10, Window: time.Minute, Cooldown: time.Second}})
	g := pool.Group(Spec{Name: "m", Strategy: Failover, Targets: targets(1)})
	b := g.Members()[0].Backend
	// Alternating outcomes never make 3 in a row, but half of them fail.
	for i := range 9 {
		o := Success
		if i%2 == 1 {
			o = Failure
		}
		pickOnce(t, g, o)
		clock.Advance(time.Second)
	}
	if b.Breaker() != Closed {
		t.Fatal("opened below min_requests")
	}
	pickOnce(t, g, Failure) // 5 of 10
	if b.Breaker() != Open {
		t.Fatalf("breaker %v at a 50%% error rate", b.Breaker())
	}

	// Old outcomes leave the window.
	clock2 := newFakeClock()
	pool2 := NewPool(PoolOptions{Clock: clock2, Breaker: BreakerConfig{ErrorRate: 0.5, MinRequests: 4, Window: 10 * time.Second}})
	g2 := pool2.Group(Spec{Name: "m", Targets: targets(1)})
	for range 3 {
		pickOnce(t, g2, Failure)
	}
	clock2.Advance(time.Minute)
	pickOnce(t, g2, Failure)
	if s := g2.Members()[0].Breaker(); s != Closed {
		t.Fatalf("failures from outside the window counted: %v", s)
	}
}

func TestAllOpenPicksLeastRecentlyFailed(t *testing.T) {
	clock := newFakeClock()
	var changes []string
	pool := breakerPool(clock, &changes)
	g := pool.Group(Spec{Name: "m", Strategy: RoundRobin, Targets: targets(3)})
	// Open c first, then a, then b.
	for _, name := range []string{"c", "a", "b"} {
		for _, m := range g.Members() {
			if m.Deployment.Provider == name {
				for range 3 {
					l := &Lease{Backend: m.Backend, Deployment: m.Deployment}
					m.requests.Add(1)
					l.Done(Failure, 0, 0)
				}
			}
		}
		clock.Advance(time.Second)
	}
	if _, ok := g.Pick(nil, 1, false); ok {
		t.Fatal("picked an open deployment without lastResort")
	}
	l, ok := g.Pick(nil, 1, true)
	if !ok || l.Deployment.Provider != "c" {
		t.Fatalf("last resort picked %v, want c (failed longest ago)", l)
	}
	l.Done(Success, 0, 0)
	if l.Backend.Breaker() != Closed {
		t.Fatal("a last-resort success did not close the breaker")
	}
}

func TestHealthDownAndRetryAfterAreSkipped(t *testing.T) {
	clock := newFakeClock()
	pool := NewPool(PoolOptions{Clock: clock})
	g := pool.Group(Spec{Name: "m", Strategy: Failover, Targets: targets(2)})
	pool.SetDown("a", true)
	if got := pickOnce(t, g, Success); got != "b" {
		t.Fatalf("down deployment picked")
	}
	pool.SetDown("a", false)
	l, _ := g.Pick(nil, 1, true)
	l.Done(Failure, 0, 5*time.Second) // a 429 with Retry-After: 5
	if got := pickOnce(t, g, Success); got != "b" {
		t.Fatal("deployment picked during its Retry-After")
	}
	clock.Advance(5 * time.Second)
	if got := pickOnce(t, g, Success); got != "a" {
		t.Fatal("deployment not picked after its Retry-After")
	}
}

// TestInheritCarriesBreakerAndLatency: a new pool (a config reload) takes
// an open breaker, a latency average and a running Retry-After from the
// old one for the same deployment, but not for one whose base URL
// changed, and not the old pool's probe in flight.
func TestInheritCarriesBreakerAndLatency(t *testing.T) {
	clock := newFakeClock()
	var changes []string
	old := breakerPool(clock, &changes)
	g := old.Group(Spec{Name: "m", Strategy: Failover, Targets: targets(2)})
	for range 3 {
		pickOnce(t, g, Failure) // opens a's breaker
	}
	pickOnce(t, g, Success) // b: a latency sample
	b := g.Members()[1].Backend
	b.coolFor(clock.Now(), time.Minute)

	fresh := breakerPool(clock, &changes)
	ts := targets(2)
	moved := *ts[1]
	moved.BaseURL = "http://elsewhere"
	ts2 := []*provider.Deployment{ts[0], &moved}
	g2 := fresh.Group(Spec{Name: "m", Strategy: Failover, Targets: ts})
	g3 := NewPool(PoolOptions{Clock: clock}).Group(Spec{Name: "m", Strategy: Failover, Targets: ts2})
	fresh.Inherit(old)
	g3.pool.Inherit(old)

	if a2 := g2.Members()[0].Backend; a2.Breaker() != Open {
		t.Fatalf("inherited breaker %v, want open", a2.Breaker())
	}
	if l, ok := g2.Members()[1].Backend.Latency(); !ok || l != time.Millisecond {
		t.Fatalf("inherited latency %v %v", l, ok)
	}
	if _, ok := g2.Pick(nil, 10, false); ok {
		t.Fatal("picked although a's breaker is open and b's Retry-After runs")
	}
	if _, ok := g3.Members()[1].Backend.Latency(); ok {
		t.Fatal("a deployment whose base URL changed inherited the old latency")
	}

	// After the cooldown the new pool sends its own probe, even if the
	// old pool's probe never ends.
	clock.Advance(time.Minute + time.Second)
	oldProbe, _ := g.Pick(nil, 10, true)
	if oldProbe.Deployment.Provider != "a" {
		t.Fatalf("old pool probed %s", oldProbe.Deployment.Provider)
	}
	newer := breakerPool(clock, &changes)
	g4 := newer.Group(Spec{Name: "m", Strategy: Failover, Targets: targets(2)})
	newer.Inherit(old)
	if p, ok := g4.Pick(nil, 10, false); !ok || p.Deployment.Provider != "a" {
		t.Fatalf("new pool did not probe a: %v %v", p, ok)
	}
}
