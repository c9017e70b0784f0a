package metrics

import (
	"time"

	"gatehouse/internal/llm"
)

// RequestObs is what one finished API request tells the metrics. Every
// label it feeds is bounded: Model is a configured group name (never a
// client's unknown model), Project a project's name, Provider a
// configured provider; keys and customers are never labels.
type RequestObs struct {
	Project   string
	Model     string // client-facing model; "" when the request was not routed
	Provider  string // the provider that answered (or was tried last); ""
	Route     string // the API path
	Code      int
	ErrorKind string // "" on success
	Took      time.Duration
	TTFT      time.Duration // 0 unless a stream's first chunk went out
	Overhead  time.Duration // the gateway's own time (x-gatehouse-overhead-ms)

	PromptTokens, CompletionTokens, CachedTokens, ReasoningTokens int
	CostMicros                                                    int64
	// Cache is hit, semantic, miss or bypass; "" records nothing.
	Cache string
	// DenialScope and DenialKind name the limit that refused the
	// request (key, project, customer, key_model; requests, tokens,
	// budget); "" when none did.
	DenialScope, DenialKind string
}

// bundleKey is the label tuple of a request's instruments.
type bundleKey struct {
	project, model, provider, route, kind, cache string
	code                                         int
}

// maxBundles bounds the resolved attempt pairs kept; pairs past it are
// resolved on each attempt (correct, a little slower). Bundles are all
// kept (resolvedSet.keepAll).
const maxBundles = 10000

// slot is the key's cheap hash for resolvedSet's recent table: the
// addresses of its project and model with the status, mixed by one
// multiplication. A request's labels are the configuration's own strings
// (a project's name, a group's), the same bytes request after request, so
// their addresses tell its tuples apart as their contents would, for a
// few instructions where the lengths and last bytes of six strings took
// about thirty; a tuple whose strings sit elsewhere takes another slot,
// which serves it as well (see slotted).
func (k bundleKey) slot() uint {
	return mix(addr(k.project) ^ addr(k.model)<<1 ^ uint(k.code))
}

// same is *k == *o, by llm.SameString, written as lengths first and then
// contents by address: a hit compares them all, and one boolean
// expression of SameStrings makes each a value before the next.
func (k *bundleKey) same(o *bundleKey) bool {
	if k.code != o.code || len(k.project) != len(o.project) || len(k.model) != len(o.model) ||
		len(k.provider) != len(o.provider) || len(k.route) != len(o.route) || len(k.kind) != len(o.kind) ||
		len(k.cache) != len(o.cache) {
		return false
	}
	return llm.SameData(k.project, o.project) && llm.SameData(k.model, o.model) && llm.SameData(k.provider, o.provider) &&
		llm.SameData(k.route, o.route) && llm.SameData(k.kind, o.kind) && llm.SameData(k.cache, o.cache)
}

// identical reports that k and o hold the very same strings (address and
// length) and status, so *k == *o, in straight-line code without a
// branch a field: the tuple a slot holds is nearly always the request's
// own, in the same memory. When it is not, same decides.
func (k *bundleKey) identical(o *bundleKey) bool {
	return differ(k.project, o.project)|differ(k.model, o.model)|differ(k.provider, o.provider)|
		differ(k.route, o.route)|differ(k.kind, o.kind)|differ(k.cache, o.cache)|uint(k.code^o.code) == 0
}

func (m *Metrics) bundle(k *bundleKey) *bundle {
	if r := m.bundles.recentFor(k.slot()); r != nil && (r.key.identical(k) || r.key.same(k)) {
		return r.val
	}
	return m.bundles.get(*k, m.newBundle)
}

func (m *Metrics) newBundle(bundleKey) *bundle { return new(bundle) }

// Observe records one finished API request.
func (m *Metrics) Observe(o *RequestObs) {
	if m == nil {
		return
	}
	k := bundleKey{project: o.Project, model: o.Model, provider: o.Provider, route: o.Route, kind: o.ErrorKind, cache: o.Cache, code: o.Code}
	b := m.bundle(&k)
	b.requests.Add(1)
	b.duration.observe(int64(o.Took), m.latencyNanos)
	if o.TTFT > 0 {
		b.ttft.observe(int64(o.TTFT), m.latencyNanos)
	}
	b.overhead.observe(int64(o.Overhead), m.overheadNanos)
	if o.PromptTokens > 0 {
		b.prompt.Add(uint64(o.PromptTokens))
	}
	if o.CompletionTokens > 0 {
		b.completion.Add(uint64(o.CompletionTokens))
	}
	if o.CachedTokens > 0 {
		b.cached.Add(uint64(o.CachedTokens))
	}
	if o.ReasoningTokens > 0 {
		b.reasoning.Add(uint64(o.ReasoningTokens))
	}
	if o.CostMicros > 0 {
		b.cost.Add(o.CostMicros)
	}
	if o.Cache != "" {
		b.cache.Add(1)
	}
	if o.DenialKind != "" {
		m.denials.WithLabelValues(o.Project, o.DenialScope, o.DenialKind).Inc() // refusals are the rare path
	}
}

// Begin counts a request in flight until the returned func is called.
func (m *Metrics) Begin() {
	if m != nil {
		m.inFlight.Add(1)
	}
}

// End ends what Begin counted.
func (m *Metrics) End() {
	if m != nil {
		m.inFlight.Add(-1)
	}
}
