package storetest

import (
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/tokens"
)

// testPrices holds a store to tokens.PriceStore: every backend keeps the
// admin API's price overrides.
func testPrices(t *testing.T, s auth.Store) {
	ps, ok := s.(tokens.PriceStore)
	if !ok {
		t.Fatalf("%T does not implement tokens.PriceStore", s)
	}
	ctx := ctxFor(t)
	if got, err := ps.Prices(ctx); err != nil || len(got) != 0 {
		t.Fatalf("new store: Prices = %v, %v; want none", got, err)
	}
	a := &tokens.StoredPrice{Model: "gpt-4o", Input: 2.5, CachedInput: 1.25, Output: 10}
	b := &tokens.StoredPrice{Model: "acme/custom-1", Input: 0.1, Output: 0.2}
	for _, p := range []*tokens.StoredPrice{a, b} {
		if err := ps.SetPrice(ctx, p); err != nil {
			t.Fatal(err)
		}
		checkStamp(t, "UpdatedAt", p.UpdatedAt)
	}
	got, err := ps.Prices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Prices", []tokens.StoredPrice{*b, *a}, got) // ordered by model

	// Setting again replaces the price.
	time.Sleep(2 * time.Millisecond)
	a.Input, a.CachedInput, a.Output = 3, 0, 12
	if err := ps.SetPrice(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err = ps.Prices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Prices after replace", []tokens.StoredPrice{*b, *a}, got)

	if err := ps.DeletePrice(ctx, "acme/custom-1"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeletePrice(again)", ps.DeletePrice(ctx, "acme/custom-1"), auth.ErrNotFound)
	got, err = ps.Prices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Prices after delete", []tokens.StoredPrice{*a}, got)
}
