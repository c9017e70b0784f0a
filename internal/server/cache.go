package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/cache"
	"gatehouse/internal/llm"
	"gatehouse/internal/route"
	"gatehouse/internal/stream"
)

// Caching is the exact response cache as one config generation uses it.
type Caching struct {
	Cache *cache.Cache // the process's tiers, shared by every generation
	// Enabled is the config's default (cache.exact.enabled); a project's
	// own cache setting overrides it.
	Enabled bool
	TTL     time.Duration // cache.exact.ttl; x-gatehouse-cache-ttl overrides it per request
	// MaxEntryBytes bounds one stored answer; a larger one is served but
	// not kept.
	MaxEntryBytes int64
	// Semantic is the semantic cache; nil when no embedder is configured.
	Semantic *Semantic
}

const (
	hdrCache    = "X-Gatehouse-Cache"
	hdrCacheTTL = "X-Gatehouse-Cache-Ttl"
)

// cacheHeader holds the x-gatehouse-cache values, built once: every
// response carries one, and net/http never writes to a header's slice.
var cacheHeader = map[string][]string{
	account.CacheHit: {account.CacheHit}, account.CacheSemantic: {account.CacheSemantic},
	account.CacheMiss: {account.CacheMiss}, account.CacheBypass: {account.CacheBypass},
}

// cacheUse is what the cache does for one exchange.
type cacheUse struct {
	result  string // account.CacheHit, CacheMiss or CacheBypass; "" until decided (bypass)
	read    bool   // look the answer up (not Cache-Control: no-cache)
	write   bool   // keep the answer (not no-store, a positive TTL)
	ttl     time.Duration
	key     cache.Key
	hit     *cache.Entry // the entry served
	pending *cache.Entry // the answer to keep once its cost is known
	stored  bool         // the answer is in the cache (storeAnswer)
	// The semantic query's scope and its embedding, kept to index the
	// answer under them once it is stored.
	scope  string
	vector []float32
}

// cacheResult is the x-gatehouse-cache value and the record's cache field.
func (x *exchange) cacheResult() string {
	if x.cache.result == "" {
		return account.CacheBypass
	}
	return x.cache.result
}

// cachePolicy reads the request's cache controls, before admission: an
// invalid x-gatehouse-cache-ttl is refused (400) without spending the
// caller's rate limit. It reports false when the request was answered.
func (x *exchange) cachePolicy() bool {
	c := x.rt.Caching
	p := x.principal
	if c == nil || p == nil {
		return true
	}
	on, ttl := c.Enabled, c.TTL
	if o := p.Cache; o != nil {
		if o.Exact.Enabled != nil {
			on = *o.Exact.Enabled
		}
		if o.Exact.TTLSeconds > 0 {
			ttl = time.Duration(o.Exact.TTLSeconds) * time.Second
		}
	}
	if !on || p.NoCache {
		return true
	}
	noCache, noStore := cacheControl(x.r.Header)
	if v := x.ownField(hdrCacheTTL); v != "" {
		var err *llm.Error
		if ttl, err = parseCacheTTL(v); err != nil {
			x.fail(err)
			return false
		}
	}
	x.cache.read = !noCache
	x.cache.write = !noStore && ttl > 0
	x.cache.ttl = ttl
	return true
}

// maxCacheTTL bounds x-gatehouse-cache-ttl: a year.
const maxCacheTTL = 365 * 24 * time.Hour

// parseCacheTTL reads an x-gatehouse-cache-ttl value: a whole number of
// seconds up to a year, spaces around it allowed.
func parseCacheTTL(v string) (time.Duration, *llm.Error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n > int64(maxCacheTTL/time.Second) {
		return 0, &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusBadRequest, Type: "invalid_request_error",
			Code: "invalid_cache_ttl", Param: "x-gatehouse-cache-ttl",
			Message: "x-gatehouse-cache-ttl must be a whole number of seconds from 0 to 31536000."}
	}
	return time.Duration(n) * time.Second, nil
}

// cacheControl reports the no-cache and no-store directives of the
// request's Cache-Control headers.
func cacheControl(h http.Header) (noCache, noStore bool) {
	for _, v := range h.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			switch strings.ToLower(strings.TrimSpace(d)) {
			case "no-cache":
				noCache = true
			case "no-store":
				noStore = true
			}
		}
	}
	return noCache, noStore
}

// cacheProject is the project part of a cache key: the project's id, or
// for a project that lives in the config only, its name.
func cacheProject(x *exchange) string {
	if p := x.principal; p.ProjectID != "" {
		return p.ProjectID
	}
	return "config:" + x.principal.Project
}

// serveFromCache looks the request up once it is admitted for group g
// and, on a hit, answers from the stored entry; true when it answered.
func (x *exchange) serveFromCache(req *llm.ChatRequest, g *route.Group, rp reply) bool {
	if !x.cache.read && !x.cache.write {
		return false
	}
	key, err := cache.NewKey(cacheProject(x), g.Name, req.Body)
	if err != nil { // cannot happen for a parsed request; then simply uncached
		x.cache.read, x.cache.write = false, false
		return false
	}
	x.cache.key = key
	if x.cache.read {
		x.cache.result = account.CacheMiss
		if e, ok := x.rt.Caching.Cache.Get(x.r.Context(), x.principal.Project, key); ok &&
			x.serveEntry(e, req, rp, account.CacheHit) {
			return true
		}
	}
	return x.semanticLookup(req, g, rp)
}

// serveEntry answers with a stored entry, whole or as a stream as the
// request asks, as a hit of kind result (hit or semantic); false when the
// entry cannot be read (the request then goes upstream).
func (x *exchange) serveEntry(e *cache.Entry, req *llm.ChatRequest, rp reply, result string) bool {
	if req.Stream {
		return x.replayHit(e, req, rp, result)
	}
	body, err := e.Body()
	var slot llm.UsageSlot
	if err == nil && rp.completion != nil {
		body, slot, err = rp.completion(body)
	}
	if err != nil {
		return false
	}
	x.hitEntry(e, result)
	x.usageSlot = slot
	x.writeJSON(body)
	return true
}

// hitEntry makes e the exchange's answer: its usage is what the client
// sees; its cost, zero, is what the client pays.
func (x *exchange) hitEntry(e *cache.Entry, result string) {
	x.cache.result, x.cache.hit = result, e
	x.usage, x.hasUsage = e.Usage, true
}

// replayHit streams a stored answer with the events it was stored with.
func (x *exchange) replayHit(e *cache.Entry, req *llm.ChatRequest, rp reply, result string) bool {
	st, err := e.Stream()
	if err != nil {
		return false
	}
	x.hitEntry(e, result)
	free := func(llm.Usage) string { return zeroCost }
	var enc stream.Encoder
	if rp.encoder != nil {
		enc = rp.encoder(free)
	}
	fields := x.streamFields()
	res, err := stream.Relay(x.w, st, stream.Options{IncludeUsage: req.IncludeUsage, Now: x.s.now, Encoder: enc,
		UsageCost: free, Fields: fields})
	x.written = true
	if !res.FirstChunk.IsZero() {
		x.ttft = res.FirstChunk.Sub(x.start)
	}
	if err != nil {
		x.err = llm.AsError(err) // the client went away mid-replay
	}
	return true
}

// keepAnswer notes a complete upstream answer for the cache; keepCached
// stores it once settlement has priced it.
func (x *exchange) keepAnswer(e *cache.Entry) {
	if x.cache.write && x.cache.key != "" {
		x.cache.pending = e
	}
}

// keepCached stores the pending answer of a successful exchange, with
// the cost a later hit will save, unless storeAnswer already did, and
// indexes its question for the semantic cache. It runs after the
// response is written (a stream's cost is known only at its end).
func (x *exchange) keepCached() {
	if x.cache.pending != nil && !x.cache.stored {
		x.storeAnswer()
	}
	if x.cache.stored {
		x.keepVector(x.cache.key) // may be a database round trip: never before the response
	}
}

// storeAnswer puts the pending answer in the cache. A whole answer is
// stored as its response is written (writeJSON), once its cost is
// fixed, so the client's next identical request already finds it; the
// in-process put takes a microsecond, the lower tiers are written in
// the background.
func (x *exchange) storeAnswer() {
	e := x.cache.pending
	x.cache.pending = nil
	if e == nil || x.err != nil || x.status != http.StatusOK {
		return
	}
	e.Project = x.principal.Project
	if x.adm.costed {
		e.Cost = x.adm.cost
	}
	if d := x.deployment; d != nil {
		e.ServedModel, e.Provider, e.Deployment = d.Model, d.Provider, d.Provider+"/"+d.Model
	}
	e.Expires = x.s.now().Add(x.cache.ttl)
	if e.Size() > x.rt.Caching.MaxEntryBytes {
		return
	}
	x.rt.Caching.Cache.Put(x.cache.key, e)
	x.cache.stored = true
}
