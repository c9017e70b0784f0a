package tokens

import (
	"context"
	"strings"
	"sync/atomic"
	"time"
)

// StoredPrice is a price set through the admin API and kept in the record
// store: USD per million tokens, as price pages write them, by upstream
// model id. It overrides the config's pricing and the embedded catalog.
type StoredPrice struct {
	Model       string    `json:"model"`
	Input       float64   `json:"input"`
	CachedInput float64   `json:"cached_input"` // 0 means Input
	Output      float64   `json:"output"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Price is p in the catalog's units.
func (p StoredPrice) Price() Price { return PerMillion(p.Input, p.CachedInput, p.Output) }

// PriceStore keeps price overrides. The sqlite and postgres stores
// implement it; the admin API writes through it and an Overlay is loaded
// from it, never the request path.
type PriceStore interface {
	// Prices lists every stored price, ordered by model.
	Prices(ctx context.Context) ([]StoredPrice, error)
	// SetPrice creates or replaces the price of p.Model, filling UpdatedAt.
	SetPrice(ctx context.Context, p *StoredPrice) error
	// DeletePrice removes a model's price; when there is none it fails
	// with an error matching the stores' not-found error (auth.ErrNotFound).
	DeletePrice(ctx context.Context, model string) error
}

// Overlay is a set of price overrides that changes while catalogs built
// over it stay in use: the prices of the record store, loaded in the
// background, so that a lookup on the request path costs one atomic load
// and never a query. The zero Overlay holds no prices. It is safe for
// concurrent use.
type Overlay struct {
	cur atomic.Pointer[overlayState]
}

type overlayState struct {
	gen    uint64 // bumped by every Set; catalogs drop what they resolved under an older one
	prices priceIndex
}

// Set replaces every price of the overlay, keyed by upstream model id.
func (o *Overlay) Set(prices map[string]Price) {
	m := newPriceIndex(prices)
	for {
		old := o.cur.Load()
		next := &overlayState{prices: m, gen: 1}
		if old != nil {
			next.gen = old.gen + 1
		}
		if o.cur.CompareAndSwap(old, next) {
			return
		}
	}
}

var emptyOverlay = &overlayState{}

func (o *Overlay) state() *overlayState {
	if o == nil {
		return emptyOverlay
	}
	if st := o.cur.Load(); st != nil {
		return st
	}
	return emptyOverlay
}

// priceIndex finds the prices set by model id (the store's or the
// config's) in two steps: the id exactly as written (case aside), so
// "openai/gpt-4o" on an OpenRouter deployment and "gpt-4o" on OpenAI can
// have different prices; then by normalised id, where two spellings of
// one model ("openai/gpt-4o" and "gpt-4o") may collide. A collision goes
// to the spelling that is already normalised (the generic price), and
// between two others to the alphabetically first: never to map order.
type priceIndex struct {
	exact map[string]Price // by lower-cased id
	norm  map[string]Price // by normalise(id)
}

func newPriceIndex(prices map[string]Price) priceIndex {
	x := priceIndex{exact: make(map[string]Price, len(prices)), norm: make(map[string]Price, len(prices))}
	winner := make(map[string]string, len(prices)) // normalised id → the id whose price it holds
	for id, p := range prices {
		lower := strings.ToLower(strings.TrimSpace(id))
		x.exact[lower] = p
		n := normalise(id)
		if w, ok := winner[n]; ok && !normalisedBeats(lower, w, n) {
			continue
		}
		winner[n] = lower
		x.norm[n] = p
	}
	return x
}

// normalisedBeats says whether id a takes normalised id n from b.
func normalisedBeats(a, b, n string) bool {
	if (a == n) != (b == n) {
		return a == n
	}
	return a < b
}

// find looks model up exactly (lower-cased) or, with exact false, by its
// normalised id.
func (x priceIndex) find(id string, exact bool) (Price, bool) {
	m := x.norm
	if exact {
		m = x.exact
	}
	p, ok := m[id]
	return p, ok
}
