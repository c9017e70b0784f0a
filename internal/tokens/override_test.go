package tokens

import "testing"

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
