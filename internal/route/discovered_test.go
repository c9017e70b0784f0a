package route

import (
	"sync"
	"testing"

	"gatehouse/internal/provider"
)

func group(name, prov string) *Group {
	return NewGroup(name, Failover, []*provider.Deployment{{Provider: prov, Model: name}}, nil, provider.Timeouts{})
}

func names(gs []*Group) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Name)
	}
	return out
}

func TestDiscoveredLookupAndShadowing(t *testing.T) {
	configured := group("qwen3:8b", "cloud")
	table := NewTable([]*Group{configured, group("chat", "cloud")})
	if _, ok := table.Lookup("llama3.2:latest"); ok || table.Discovered() != nil {
		t.Fatal("nothing discovered yet")
	}
	table.SetDiscovered(NewDiscovered(
		[]*Group{group("llama3.2:latest", "box"), group("qwen3:8b", "box"), group("box/qwen3:8b", "box"), group("llama3.2:latest", "other")},
		[]*Group{group("llama3.2", "box"), group("chat", "box")}))

	if g, ok := table.Lookup("llama3.2:latest"); !ok || g.Targets[0].Provider != "box" {
		t.Fatalf("discovered model not routable, or the second of a name won: %v", g)
	}
	if _, ok := table.Lookup("llama3.2"); !ok {
		t.Fatal("alias not routable")
	}
	if g, _ := table.Lookup("qwen3:8b"); g != configured {
		t.Fatal("a discovered model shadowed the configured one of the same name")
	}
	if g, _ := table.Lookup("chat"); g.Targets[0].Provider != "cloud" {
		t.Fatal("a discovered alias shadowed a configured model")
	}
	if got := names(table.Discovered()); len(got) != 2 || got[0] != "llama3.2:latest" || got[1] != "box/qwen3:8b" {
		t.Fatalf("listed %v: shadowed names and aliases must not be listed", got)
	}
	table.SetDiscovered(nil)
	if _, ok := table.Lookup("llama3.2:latest"); ok {
		t.Fatal("removed set still routable")
	}
}

// TestDiscoveredSwapIsRaceFree runs lookups while sets are swapped; run
// with -race.
func TestDiscoveredSwapIsRaceFree(t *testing.T) {
	table := NewTable(nil)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range 1000 {
			table.SetDiscovered(NewDiscovered([]*Group{group("m", "box")}, nil))
		}
	}()
	go func() {
		defer wg.Done()
		for range 1000 {
			table.Lookup("m")
			table.Discovered()
		}
	}()
	wg.Wait()
}
