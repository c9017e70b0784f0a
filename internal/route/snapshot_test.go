package route

import (
	"testing"
	"time"
)

func TestSnapshot(t *testing.T) {
	clock := newFakeClock()
	pool := NewPool(PoolOptions{Clock: clock,
		Breaker: BreakerConfig{Failures: 2, Cooldown: 30 * time.Second, ErrorRate: 0.9, Window: time.Minute, MinRequests: 100}})
	g := pool.Group(Spec{Name: "m", Strategy: Failover, Targets: targets(2), Weights: []int{3, 1}, Mode: ModeAny})
	table := NewTable([]*Group{g})

	// Failover tries a first: it fails twice (its breaker opens); then b
	// answers once and holds one request open.
	pick := func(want string, cost int64) *Lease {
		t.Helper()
		l, ok := g.Pick(nil, cost, false)
		if !ok || l.Deployment.Provider != want {
			t.Fatalf("picked %v, want %s", l, want)
		}
		return l
	}
	for range 2 {
		pick("a", 100).Done(Failure, 0, 0)
	}
	opened := clock.Now()
	pick("b", 100).Done(Success, 40*time.Millisecond, 0)
	held := pick("b", 250)
	clock.Advance(10 * time.Second)

	snap := table.Snapshot()
	if len(snap) != 1 || snap[0].Name != "m" || snap[0].Strategy != Failover || snap[0].Discovered {
		t.Fatalf("snapshot %+v", snap)
	}
	da, db := snap[0].Deployments[0], snap[0].Deployments[1]
	if da.Provider != "a" || da.Weight != 3 || !da.Allowed || da.Breaker != Open || !da.BreakerSince.Equal(opened) ||
		!da.BreakerUntil.Equal(opened.Add(30*time.Second)) || da.Attempts != 2 || da.Failures != 2 || da.Window != time.Minute {
		t.Errorf("a: %+v", da)
	}
	if db.Provider != "b" || db.Weight != 1 || db.Breaker != Closed || !db.BreakerSince.IsZero() || db.InFlightRequests != 1 ||
		db.InFlightTokens != 250 || !db.HasLatency || db.Latency != 40*time.Millisecond || db.Attempts != 1 || db.Failures != 0 {
		t.Errorf("b: %+v", db)
	}

	// The window forgets what is older than a minute; the held request
	// ends.
	held.Done(Success, 0, 0)
	clock.Advance(time.Minute)
	db = table.Snapshot()[0].Deployments[1]
	if db.InFlightRequests != 0 || db.InFlightTokens != 0 || db.Attempts != 0 {
		t.Errorf("b a minute later: %+v", db)
	}
}
