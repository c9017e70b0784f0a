package route

import (
	"fmt"
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

// TestDiscoveredSwapIsConsistent runs lookups while sets are swapped:
// every lookup sees one whole set, the old or the new, never a mix (a set
// pairs model "m" at provider p with "p/m"), and the last set wins. Under
// -race it also proves the swap is race-free.
func TestDiscoveredSwapIsConsistent(t *testing.T) {
	table := NewTable(nil)
	set := func(p string) *Discovered {
		return NewDiscovered([]*Group{group("m", p), group(p+"/m", p)}, nil)
	}
	const swaps = 1000
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range swaps {
			table.SetDiscovered(set([]string{"a", "b"}[i%2]))
		}
	}()
	errs := make(chan string, 1)
	go func() {
		defer wg.Done()
		for range swaps {
			listed := table.Discovered()
			if listed == nil {
				continue // before the first set
			}
			p := listed[0].Targets[0].Provider
			if len(listed) != 2 || listed[0].Name != "m" || listed[1].Name != p+"/m" || listed[1].Targets[0].Provider != p {
				select {
				case errs <- fmt.Sprintf("a mixed or partial set: %v", names(listed)):
				default:
				}
			}
			if g, ok := table.Lookup("m"); !ok || g.Name != "m" {
				select {
				case errs <- "m not routable once a set is in":
				default:
				}
			}
		}
	}()
	wg.Wait()
	close(errs)
	if e, ok := <-errs; ok {
		t.Fatal(e)
	}
	if g, ok := table.Lookup("m"); !ok || g.Targets[0].Provider != "b" {
		t.Fatalf("after the swaps m is %v, want the last set's (b)", g)
	}
}
