package tokens

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// TestOverlayPrecedence: store prices beat config overrides beat the
// embedded catalog, and a catalog in use sees every Set at once.
func TestOverlayPrecedence(t *testing.T) {
	var o Overlay
	c, err := NewCatalog(CatalogOptions{Store: &o, Overrides: map[string]Price{"gpt-4o": PerMillion(1, 1, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Lookup("gpt-4o-2024-08-06"); p != PerMillion(1, 1, 1) {
		t.Fatalf("config override: %+v", p)
	}
	o.Set(map[string]Price{"openai/GPT-4o": PerMillion(2, 0, 3)})
	if p, _ := c.Lookup("gpt-4o-2024-08-06"); p != PerMillion(2, 0, 3) {
		t.Fatalf("store override not seen (resolution cache kept the old one): %+v", p)
	}
	o.Set(nil)
	if p, _ := c.Lookup("gpt-4o-2024-08-06"); p != PerMillion(1, 1, 1) {
		t.Fatalf("after the store price went: %+v", p)
	}
	if _, ok := c.Lookup("no-such-model"); ok {
		t.Fatal("unknown model priced")
	}
	o.Set(map[string]Price{"no-such-model": PerMillion(5, 0, 5)})
	if p, ok := c.Lookup("no-such-model"); !ok || p != PerMillion(5, 0, 5) {
		t.Fatalf("a stored price for a model the catalog lacks: %+v %v", p, ok)
	}
}

// TestCollidingSpellings: two stored ids of one model ("openai/gpt-4o"
// for a router, "gpt-4o" for OpenAI) each price the deployment that spells
// the model that way, and a third spelling gets the generic one — every
// time, whatever the map order.
func TestCollidingSpellings(t *testing.T) {
	generic, routed, other := PerMillion(1, 0, 1), PerMillion(2, 0, 2), PerMillion(3, 0, 3)
	for i := 0; i < 50; i++ { // map iteration order varies run to run
		var o Overlay
		c, err := NewCatalog(CatalogOptions{Store: &o})
		if err != nil {
			t.Fatal(err)
		}
		o.Set(map[string]Price{"openai/gpt-4o": routed, "gpt-4o": generic, "azure/GPT-4o": other})
		for model, want := range map[string]Price{
			"openai/gpt-4o":            routed,
			"OpenAI/GPT-4o":            routed,
			"gpt-4o":                   generic,
			"azure/gpt-4o":             other,
			"gpt-4o-2024-08-06":        generic,
			"openai/gpt-4o-2024-08-06": generic, // no exact entry: by family, the generic price
		} {
			if p, _ := c.Lookup(model); p != want {
				t.Fatalf("%s: got %+v, want %+v", model, p, want)
			}
		}
		// Without the generic spelling, the alphabetically first wins.
		o.Set(map[string]Price{"openai/gpt-4o": routed, "azure/gpt-4o": other})
		if p, _ := c.Lookup("gpt-4o-mini-x"); p == routed || p == other {
			t.Fatalf("gpt-4o-mini-x took a gpt-4o override: %+v", p)
		}
		if p, _ := c.Lookup("gpt-4o"); p != other {
			t.Fatalf("gpt-4o with two router spellings: got %+v, want azure's (alphabetically first)", p)
		}
	}
	// The config's overrides follow the same rule.
	c, err := NewCatalog(CatalogOptions{Overrides: map[string]Price{"openai/gpt-4o": routed, "gpt-4o": generic}})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := c.Lookup("openai/gpt-4o"); p != routed {
		t.Fatalf("config exact spelling: %+v", p)
	}
	if p, _ := c.Lookup("gpt-4o-2024-11-20"); p != generic {
		t.Fatalf("config family: %+v", p)
	}
}

// TestConfigured: only the config's and the store's prices count, never
// the embedded catalog's (a local deployment of a catalogued model is
// free unless the operator prices it).
func TestConfigured(t *testing.T) {
	c, err := NewCatalog(CatalogOptions{Overrides: map[string]Price{"my-llama": PerMillion(1, 0, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Configured("gpt-4o"); ok {
		t.Error("the catalog's gpt-4o price counted as configured")
	}
	if _, ok := c.Lookup("gpt-4o"); !ok {
		t.Error("gpt-4o missing from the catalog")
	}
	if p, ok := c.Configured("my-llama-3b"); !ok || p != PerMillion(1, 0, 2) {
		t.Errorf("my-llama-3b: %v %v, want the override's family price", p, ok)
	}
}

// TestLookupKeptAgreesWithFind: what Lookup keeps gives what resolving
// afresh gives, for more IDs than it has slots (so IDs share slots and
// take turns), looked up twice each, across changes of the store's
// prices, and from several goroutines at once.
func TestLookupKeptAgreesWithFind(t *testing.T) {
	var o Overlay
	c, err := NewCatalog(CatalogOptions{Store: &o, Overrides: map[string]Price{"gpt-4o": PerMillion(1, 1, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 3 * resolvedSlots {
		ids = append(ids, fmt.Sprintf("gpt-4o-%d", i), fmt.Sprintf("claude-3-5-sonnet-%d", i), fmt.Sprintf("model-%d", i))
	}
	stores := []map[string]Price{nil, {"model-7": PerMillion(5, 0, 5)}, {"gpt-4o": PerMillion(2, 0, 3), "model-8": PerMillion(4, 0, 4)}}
	changed := []string{"model-7", "model-8", "gpt-4o-1"} // priced differently by some store
	for _, prices := range stores {
		for _, id := range changed { // kept under the prices before
			c.Lookup(id)
		}
		o.Set(prices)
		for _, id := range changed {
			want, wantOK := c.find(o.state().prices, id, true)
			if got, ok := c.Lookup(id); got != want || ok != wantOK {
				t.Fatalf("%s after the store's prices changed: %+v %v, want %+v %v", id, got, ok, want, wantOK)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan string, 4)
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range ids {
					id := ids[(k*(g+1))%len(ids)]
					want, wantOK := c.find(o.state().prices, id, true)
					for range 2 {
						if got, ok := c.Lookup(id); got != want || ok != wantOK {
							errs <- fmt.Sprintf("%s: %+v %v, want %+v %v", id, got, ok, want, wantOK)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatal(e)
		}
	}
}

// TestGeneration: a catalog's generation stays while its prices do, and
// moves on with every change of its store overlay.
func TestGeneration(t *testing.T) {
	store := &Overlay{}
	c, err := NewCatalog(CatalogOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	g0 := c.Generation()
	if c.Lookup("gpt-4o"); c.Generation() != g0 {
		t.Fatal("a look-up moved the generation")
	}
	seen := map[uint64]bool{g0: true}
	for i := range 3 {
		store.Set(map[string]Price{"gpt-4o": PerMillion(float64(i), 0, 1)})
		g := c.Generation()
		if seen[g] {
			t.Fatalf("change %d: generation %d seen before", i, g)
		}
		seen[g] = true
	}
}

// TestLookupByAddress: IDs whose bytes lie where they share a byAddress
// slot are told apart by their contents, the same ID at another address
// finds the same price, and an ID found by its address is resolved
// afresh when the store's prices change.
func TestLookupByAddress(t *testing.T) {
	var o Overlay
	c, err := NewCatalog(CatalogOptions{Store: &o})
	if err != nil {
		t.Fatal(err)
	}
	// One buffer, so the slots of its parts are known: 16 bytes a slot.
	buf := make([]byte, 16*resolvedSlots+32)
	at := func(off int, id string) string {
		copy(buf[off:], id)
		return unsafe.String(&buf[off], len(id))
	}
	mini, big := at(0, "gpt-4o-mini"), at(16*resolvedSlots, "gpt-4o")
	if addressSlot(mini) != addressSlot(big) {
		t.Fatalf("slots %d and %d: the test needs one", addressSlot(mini), addressSlot(big))
	}
	check := func(when, id string) {
		t.Helper()
		want, wantOK := c.find(o.state().prices, id, true)
		for range 2 {
			if got, ok := c.Lookup(id); got != want || ok != wantOK {
				t.Fatalf("%s, %s: %+v %v, want %+v %v", when, id, got, ok, want, wantOK)
			}
		}
	}
	for _, id := range []string{mini, big, mini, strings.Clone(big), strings.Clone(mini)} {
		check("one slot", id)
	}
	if p, _ := c.Lookup(big); p == (Price{}) {
		t.Fatal("gpt-4o has no embedded price: the test needs one")
	}
	o.Set(map[string]Price{"gpt-4o": PerMillion(7, 0, 9)})
	check("after the store's change", big)
	if p, _ := c.Lookup(big); p != PerMillion(7, 0, 9) {
		t.Fatalf("gpt-4o after the store's change: %+v", p)
	}
	check("after the store's change", mini)
}
