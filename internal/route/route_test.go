package route

import (
	"testing"

	"gatehouse/internal/provider"
)

func targets(n int) []*provider.Deployment {
	ds := make([]*provider.Deployment, n)
	for i := range ds {
		ds[i] = &provider.Deployment{Provider: string(rune('a' + i))}
	}
	return ds
}

func count(g *Group, n int) map[string]int {
	seen := map[string]int{}
	for i := 0; i < n; i++ {
		l, ok := g.Pick(nil, 0, true)
		if !ok {
			panic("nothing picked")
		}
		l.Done(Success, 0, 0)
		seen[l.Deployment.Provider]++
	}
	return seen
}

func TestFailoverPicksFirst(t *testing.T) {
	g := NewGroup("m", Failover, targets(3), nil, provider.Timeouts{})
	if got := count(g, 10); got["a"] != 10 {
		t.Fatalf("failover spread %v", got)
	}
}

func TestRoundRobinCycles(t *testing.T) {
	g := NewGroup("m", RoundRobin, targets(3), nil, provider.Timeouts{})
	got := count(g, 30)
	if got["a"] != 10 || got["b"] != 10 || got["c"] != 10 {
		t.Fatalf("round robin spread %v", got)
	}
}

func TestWeightedFollowsWeightsAndSkipsZero(t *testing.T) {
	g := NewGroup("m", Weighted, targets(3), []int{3, 1, 0}, provider.Timeouts{})
	got := count(g, 40000)
	if got["c"] != 0 {
		t.Fatalf("weight 0 target picked %d times", got["c"])
	}
	ratio := float64(got["a"]) / float64(got["b"])
	if ratio < 2.7 || ratio > 3.3 {
		t.Fatalf("a/b = %.2f, want ≈3 (%v)", ratio, got)
	}
	allZero := NewGroup("m", Weighted, targets(2), []int{0, 0}, provider.Timeouts{})
	if count(allZero, 1)["a"] != 1 {
		t.Fatal("all-zero weights should fall back to priority order")
	}
}

func TestTableLookupAndOrder(t *testing.T) {
	a := NewGroup("a", Failover, targets(1), nil, provider.Timeouts{})
	b := NewGroup("b", Failover, targets(1), nil, provider.Timeouts{})
	tab := NewTable([]*Group{b, a})
	if g, ok := tab.Lookup("a"); !ok || g != a {
		t.Fatal("lookup a")
	}
	if _, ok := tab.Lookup("zz"); ok {
		t.Fatal("lookup of unknown model succeeded")
	}
	if gs := tab.Groups(); gs[0] != b || gs[1] != a {
		t.Fatal("config order not kept")
	}
}
