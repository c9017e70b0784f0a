package tokens

// The price catalog lives here, beside the token counter, because a cost
// estimate is a token count times a price: the admission path needs both
// and nothing else. Prices are data (prices.json, embedded and dated),
// generated from LiteLLM's public price dataset at a pinned version by
// make prices (genprices); the config and the admin API override them
// per model.

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync/atomic"
	"unsafe"

	"gatehouse/internal/llm"
)

//go:embed prices.json
var catalogJSON []byte

// Price is what a model costs, in micro-dollars (1e-6 USD) per million
// tokens, which is numerically the price in USD per token times 1e12:
// integers, so every cost below is exact integer arithmetic.
type Price struct {
	Input       int64 // per million prompt tokens
	CachedInput int64 // per million prompt tokens served from the provider's cache; 0 means Input
	Output      int64 // per million completion tokens (reasoning included)
}

// PerMillion builds a Price from USD per million tokens, as price pages
// write them.
func PerMillion(input, cachedInput, output float64) Price {
	r := func(f float64) int64 { return int64(math.Round(f * 1e6)) }
	return Price{Input: r(input), CachedInput: r(cachedInput), Output: r(output)}
}

// Estimate is the worst-case cost in micro-dollars of promptTokens in and
// maxOutput out, rounded up.
func (p Price) Estimate(promptTokens, maxOutput int) int64 {
	return ceilDiv(int64(max(promptTokens, 0))*p.Input+int64(max(maxOutput, 0))*p.Output, 1e6)
}

// Cost is the cost in micro-dollars of what the upstream reported: cached
// prompt tokens at the cached rate, the rest of the prompt at the input
// rate, completion tokens (which include reasoning tokens) at the output
// rate. Rounded to the nearest micro-dollar.
func (p Price) Cost(u llm.Usage) int64 {
	cached := min(max(u.CachedTokens, 0), max(u.PromptTokens, 0))
	fresh := max(u.PromptTokens, 0) - cached
	out := max(u.CompletionTokens, u.ReasoningTokens, 0)
	cr := p.CachedInput
	if cr == 0 {
		cr = p.Input
	}
	n := int64(fresh)*p.Input + int64(cached)*cr + int64(out)*p.Output
	return (n + 500_000) / 1e6
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// ErrUnknownPrice is matched (errors.Is) by every *UnknownPriceError.
var ErrUnknownPrice = errors.New("unknown model price")

// UnknownPriceError says a model has no price and no default applies.
// The caller decides: refuse keys with budgets (their spend cannot be
// counted), let others through at cost zero.
type UnknownPriceError struct{ Model string }

func (e *UnknownPriceError) Error() string {
	return fmt.Sprintf("no price known for model %q: set one in the config or the admin API", e.Model)
}

func (e *UnknownPriceError) Is(target error) bool { return target == ErrUnknownPrice }

// DefaultMaxOutput is the output cap assumed for estimates when a
// request sets no max_tokens, unless CatalogOptions says otherwise.
const DefaultMaxOutput = 4096

// CatalogOptions adjust the embedded catalog. The zero value uses it as
// is, with no default price.
type CatalogOptions struct {
	// Overrides replace or add prices by model ID (normalised like
	// lookups, so "openai/gpt-4o" overrides "gpt-4o").
	Overrides map[string]Price
	// Store, when set, overrides Overrides and the embedded prices; it
	// may change while the catalog is in use (see Overlay).
	Store *Overlay
	// Default prices models the catalog does not know; nil makes them
	// an *UnknownPriceError.
	Default *Price
	// DefaultMaxOutput is the output cap for estimates when a request
	// sets none (DefaultMaxOutput when zero).
	DefaultMaxOutput int
}

// Catalog looks prices up by upstream model ID. It is immutable and safe
// for concurrent use; to change overrides, build a new one.
type Catalog struct {
	asOf    string
	base    map[string]Price
	context map[string]int // context windows (input tokens) from the embedded catalog
	over    priceIndex
	store   *Overlay
	def     *Price
	maxOut  int
	// resolved keeps what Lookup found for recent model IDs, a
	// direct-mapped table: a look-up is a string hash, one atomic load
	// and a compare, where a sync.Map hashed the ID as an interface and
	// walked a trie (about 250 instructions, twice a limited request).
	// Two IDs that share a slot take turns, each miss resolving afresh.
	resolved [resolvedSlots]atomic.Pointer[resolution]
	seed     maphash.Seed
	// byAddress keeps the same resolutions by where the ID's bytes lie:
	// a deployment's model is one string, priced on every request it
	// serves, so its slot is found from its address without hashing its
	// bytes, and the compare that confirms it sees the same pointer
	// (BENCHMARKS.md, "The feature tax with a margin, and every goal
	// counted again").
	byAddress [resolvedSlots]atomic.Pointer[resolution]
}

// resolution is one model ID's price as Lookup found it.
type resolution struct {
	model string
	p     Price
	ok    bool
	gen   uint64 // the store overlay's generation it was resolved under
}

// resolvedSlots bounds the IDs a catalog keeps resolved (a power of
// two: the slot is the hash masked).
const resolvedSlots = 1024

type catalogFile struct {
	AsOf   string `json:"as_of"`
	Models map[string]struct {
		Input   float64 `json:"input"`
		Cached  float64 `json:"cached"`
		Output  float64 `json:"output"`
		Context int     `json:"context"`
	} `json:"models"`
}

// NewCatalog builds a Catalog from the embedded prices and o.
func NewCatalog(o CatalogOptions) (*Catalog, error) {
	var f catalogFile
	if err := json.Unmarshal(catalogJSON, &f); err != nil {
		return nil, fmt.Errorf("price catalog: %w", err)
	}
	c := &Catalog{asOf: f.AsOf, base: make(map[string]Price, len(f.Models)), over: newPriceIndex(o.Overrides), store: o.Store, seed: maphash.MakeSeed(), def: o.Default, maxOut: o.DefaultMaxOutput}
	c.context = make(map[string]int, len(f.Models))
	for id, m := range f.Models {
		c.base[id] = PerMillion(m.Input, m.Cached, m.Output)
		if m.Context > 0 {
			c.context[id] = m.Context
		}
	}
	for id, p := range o.Overrides {
		if p.Input < 0 || p.CachedInput < 0 || p.Output < 0 {
			return nil, fmt.Errorf("price override %q: negative price", id)
		}
	}
	if c.maxOut <= 0 {
		c.maxOut = DefaultMaxOutput
	}
	return c, nil
}

// AsOf is the date of the embedded prices.
func (c *Catalog) AsOf() string { return c.asOf }

// Lookup finds the price of model without applying the default. IDs are
// matched case-insensitively after dropping provider prefixes
// ("openai/", "models/", Bedrock's "us.anthropic."), version suffixes
// (Bedrock's "-v1:0", Vertex's "@20240620") and then trailing '-'
// segments until a known ID remains, so dated snapshots
// ("gpt-4o-2024-08-06", "claude-3-5-sonnet-20241022") and aliases
// ("mistral-large-latest") find their family's price. Overrides win at
// every step: the store's first, then the config's; and an override set
// for the model ID exactly as the deployment spells it wins over all
// (see priceIndex).
func (c *Catalog) Lookup(model string) (Price, bool) {
	st := c.store.state()
	near := &c.byAddress[addressSlot(model)]
	if r := near.Load(); r != nil && r.gen == st.gen && r.model == model {
		return r.p, r.ok
	}
	slot := &c.resolved[maphash.String(c.seed, model)%resolvedSlots]
	r := slot.Load()
	if r == nil || r.gen != st.gen || r.model != model {
		p, ok := c.lookup(st.prices, model)
		r = &resolution{model: model, p: p, ok: ok, gen: st.gen}
		slot.Store(r)
	}
	near.Store(r)
	return r.p, r.ok
}

// addressSlot is the byAddress slot of s: its bytes' address, past the
// low bits every allocation shares, masked to the table.
func addressSlot(s string) uintptr {
	return (uintptr(unsafe.Pointer(unsafe.StringData(s))) >> 4) % resolvedSlots
}

// Generation names the prices c answers with: while it stays the same,
// Lookup, Price and Configured answer each model as they did before. It
// moves on when the store overlay changes (the admin API); the embedded
// prices and the config's overrides are c's for good. A caller that
// keeps a price found earlier re-uses it only under the generation it
// read before finding it.
func (c *Catalog) Generation() uint64 { return c.store.state().gen }

// Configured finds a price set for model in the config or the admin API
// (not the embedded catalog): what a local deployment, free by default,
// is charged when the operator says so.
func (c *Catalog) Configured(model string) (Price, bool) {
	return c.find(c.store.state().prices, model, false)
}

func (c *Catalog) lookup(stored priceIndex, model string) (Price, bool) {
	return c.find(stored, model, true)
}

// find resolves model as Lookup describes; withBase includes the
// embedded catalog.
func (c *Catalog) find(stored priceIndex, model string, withBase bool) (Price, bool) {
	exact := strings.ToLower(strings.TrimSpace(model))
	if p, ok := stored.find(exact, true); ok {
		return p, true
	}
	if p, ok := c.over.find(exact, true); ok {
		return p, true
	}
	// At each step down the chain of shorter IDs, an override beats the
	// catalog; and a catalog snapshot ("gpt-4o-2024-08-06") gives way to
	// an override of its family ("gpt-4o"), which the operator meant for
	// every snapshot of it.
	for id := normalise(model); id != ""; id = parent(id) {
		if p, ok := stored.find(id, false); ok {
			return p, true
		}
		if p, ok := c.over.find(id, false); ok {
			return p, true
		}
		if !withBase {
			continue
		}
		if p, ok := c.base[id]; ok {
			if fam, snap := Family(id); snap {
				if fp, ok := stored.find(fam, false); ok {
					return fp, true
				}
				if fp, ok := c.over.find(fam, false); ok {
					return fp, true
				}
			}
			return p, true
		}
	}
	return Price{}, false
}

// Family is the model family a snapshot ID belongs to — the ID without a
// trailing date (-20250514, -2024-08-06, -0125, -240620) or "-latest" —
// and whether id is such a snapshot.
func Family(id string) (string, bool) {
	if f, ok := strings.CutSuffix(id, "-latest"); ok {
		return f, f != ""
	}
	parts := strings.Split(id, "-")
	n := len(parts)
	switch {
	case n >= 4 && digitsN(parts[n-3], 4) && digitsN(parts[n-2], 2) && digitsN(parts[n-1], 2):
		return strings.Join(parts[:n-3], "-"), true
	case n >= 2 && (digitsN(parts[n-1], 8) || digitsN(parts[n-1], 6) || digitsN(parts[n-1], 4)):
		return strings.Join(parts[:n-1], "-"), true
	}
	return "", false
}

func digitsN(s string, n int) bool { return len(s) == n && isDigits(s) }

// parent is id without its last '-' segment; "" when none is left.
func parent(id string) string {
	i := strings.LastIndexByte(id, '-')
	if i <= 0 {
		return ""
	}
	return id[:i]
}

// ContextWindow is the model's context window in input tokens, from the
// embedded catalog (matched as Lookup matches IDs); false when unknown.
func (c *Catalog) ContextWindow(model string) (int, bool) {
	for id := normalise(model); id != ""; id = parent(id) {
		if n, ok := c.context[id]; ok {
			return n, true
		}
	}
	return 0, false
}

// Price is Lookup with the default applied: an *UnknownPriceError when
// the model has no price and no default is configured.
func (c *Catalog) Price(model string) (Price, error) {
	if p, ok := c.Lookup(model); ok {
		return p, nil
	}
	if c.def != nil {
		return *c.def, nil
	}
	return Price{}, &UnknownPriceError{Model: model}
}

// Estimate is the worst-case cost in micro-dollars of a request to model
// with promptTokens and the given max_tokens (the configured default cap
// when maxTokens <= 0).
func (c *Catalog) Estimate(model string, promptTokens, maxTokens int) (int64, error) {
	p, err := c.Price(model)
	if err != nil {
		return 0, err
	}
	return p.Estimate(promptTokens, c.MaxOutput(maxTokens)), nil
}

// MaxOutput is the output cap an estimate assumes for a request's
// max_tokens: maxTokens itself, or the default cap when it is unset.
func (c *Catalog) MaxOutput(maxTokens int) int {
	if maxTokens > 0 {
		return maxTokens
	}
	return c.maxOut
}

// Cost is the actual cost in micro-dollars of usage u on model.
func (c *Catalog) Cost(model string, u llm.Usage) (int64, error) {
	p, err := c.Price(model)
	if err != nil {
		return 0, err
	}
	return p.Cost(u), nil
}

// bedrockRegions and bedrockVendors are the prefixes of Bedrock model
// and inference-profile IDs ("us.anthropic.claude-…", "amazon.nova-…").
var bedrockRegions = []string{"us.", "eu.", "apac.", "global.", "us-gov.", "jp.", "au.", "ca."}
var bedrockVendors = []string{"anthropic.", "amazon.", "meta.", "mistral.", "cohere.", "ai21.", "deepseek.", "openai.", "writer."}

// Normalise is the form of a model ID the catalog is keyed by (see
// normalise); the catalog generator keys its entries with it.
func Normalise(id string) string { return normalise(id) }

// normalise lower-cases an upstream model ID and drops the parts that do
// not change its price.
func normalise(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	for _, p := range bedrockRegions {
		if strings.HasPrefix(id, p) {
			id = id[len(p):]
			break
		}
	}
	for _, p := range bedrockVendors {
		if strings.HasPrefix(id, p) {
			id = id[len(p):]
			break
		}
	}
	if i := strings.IndexByte(id, '@'); i > 0 { // Vertex: claude-3-5-sonnet@20240620
		id = id[:i]
	}
	if i := strings.LastIndexByte(id, ':'); i > 0 { // Bedrock: …-v1:0; Ollama tags are dropped too
		id = id[:i]
	}
	if i := strings.LastIndex(id, "-v"); i > 0 && isDigits(id[i+2:]) { // Bedrock: …-v1
		id = id[:i]
	}
	return id
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
