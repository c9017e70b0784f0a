package route

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// Clock is the time source of a pool and of the attempt loops that run
// on it; tests pass a fake one.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx ends, whichever is first, and
	// returns ctx.Err() in the second case.
	Sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PoolOptions configure a Pool. The zero value is usable: real time,
// breakers that never open, no exploration.
type PoolOptions struct {
	Breaker BreakerConfig
	// Explore is the share of least-latency picks that go to a random
	// deployment instead of the fastest, so a deployment that was slow
	// (or failing) and recovered is measured again. 0 means 0.05;
	// negative disables it.
	Explore float64
	// Clock is nil for real time.
	Clock Clock
	// Rand returns a number in [0,1); nil uses math/rand/v2. It serves
	// weighted picks, exploration and backoff jitter.
	Rand func() float64
	// OnBreaker, when set, is told every breaker state change (metrics).
	// It runs outside the pool's locks and must not block.
	OnBreaker func(d *provider.Deployment, s BreakerState)
}

// Pool holds the live state of every deployment of one config generation:
// circuit breakers, latency averages, in-flight tokens and load signals.
// A deployment (provider and model) used by several models is one Backend,
// so a breaker opened by one model's traffic protects the others too.
//
// Every pick takes the pool's lock for the choice and the acquisition of
// the chosen deployment's in-flight tokens together, so two concurrent
// picks never both see the old totals.
type Pool struct {
	opts    PoolOptions
	clock   Clock
	rand    func() float64
	explore float64

	mu       sync.Mutex // held by every pick; guards backends and scratch
	backends map[backendKey]*Backend
	list     []*Backend
	signals  map[string]LoadSignal // by provider name
	down     map[string]bool       // by provider name: the last health check result, for checked providers only
	scratch  []Member
}

type backendKey struct{ provider, model string }

// NewPool returns an empty pool.
func NewPool(o PoolOptions) *Pool {
	p := &Pool{opts: o, clock: o.Clock, rand: o.Rand, explore: o.Explore, backends: map[backendKey]*Backend{}}
	if p.clock == nil {
		p.clock = realClock{}
	}
	if p.rand == nil {
		p.rand = rand.Float64
	}
	if p.explore == 0 {
		p.explore = 0.05
	}
	return p
}

// Backend returns the pool's state for d's provider and model, creating
// it on first use.
func (p *Pool) Backend(d *provider.Deployment) *Backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := backendKey{d.Provider, d.Model}
	if b, ok := p.backends[k]; ok {
		return b
	}
	b := &Backend{Deployment: d, Names: newNames(d), pool: p, signal: p.signals[d.Provider]}
	b.down.Store(p.down[d.Provider]) // a model discovered while its provider is down starts down
	b.br.cfg = p.opts.Breaker
	p.backends[k] = b
	p.list = append(p.list, b)
	return b
}

// Inherit carries over what old learnt about each deployment p has too
// (same provider, model and base URL): breaker state, the latency
// average, a Retry-After still running. (Not a failing health check: the
// new pool's own checks decide that within two intervals.) A config
// reload builds a new pool; without this a reload during an outage would
// send traffic back to the failing deployment until its breaker opened
// again, and least-latency would start measuring from nothing. The new
// breaker keeps the new config's thresholds; a probe in flight on the old
// one stays the old one's (the new one may send its own). In-flight
// counts are not carried: the old pool's requests release them there.
// Call it before p serves picks.
func (p *Pool) Inherit(old *Pool) {
	if old == nil || old == p {
		return
	}
	prev := map[backendKey]*Backend{}
	for _, b := range old.Backends() {
		prev[backendKey{b.Deployment.Provider, b.Deployment.Model}] = b
	}
	for _, b := range p.Backends() {
		o, ok := prev[backendKey{b.Deployment.Provider, b.Deployment.Model}]
		if !ok || o.Deployment.BaseURL != b.Deployment.BaseURL {
			continue
		}
		b.br.inherit(&o.br)
		b.lat.inherit(&o.lat)
		b.coolUntil.Store(o.coolUntil.Load())
	}
}

// Backends lists every backend in creation order.
func (p *Pool) Backends() []*Backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Backend(nil), p.list...)
}

// Clock returns the pool's time source.
func (p *Pool) Clock() Clock { return p.clock }

// SetLoadSignal gives every backend of the named provider, present and
// future, a load signal (a model server's own view of how busy it is).
// Call it while building a generation, before the pool serves picks.
func (p *Pool) SetLoadSignal(providerName string, s LoadSignal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.signals == nil {
		p.signals = map[string]LoadSignal{}
	}
	p.signals[providerName] = s
	for _, b := range p.list {
		if b.Deployment.Provider == providerName {
			b.signal = s
		}
	}
}

// SetDown marks every backend of the named provider, present and
// future, as failing (or passing) its active health check. A down backend
// is skipped like one whose breaker is open. Snapshot shows the health of
// providers SetDown was told about, and "unchecked" for the others.
func (p *Pool) SetDown(providerName string, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down == nil {
		p.down = map[string]bool{}
	}
	p.down[providerName] = down
	for _, b := range p.list {
		if b.Deployment.Provider == providerName {
			b.down.Store(down)
		}
	}
}

func (p *Pool) breakerChanged(b *Backend, s BreakerState) {
	if p.opts.OnBreaker != nil {
		p.opts.OnBreaker(b.Deployment, s)
	}
}

// Outcome is what one attempt says about the deployment it went to.
type Outcome uint8

const (
	// Neutral says nothing: the client left, or the request was refused
	// for its own content.
	Neutral Outcome = iota
	Success
	Failure
)

// The opening texts of the request log line's members a backend's
// Names hold (Names.Members).
const (
	LogProviderMember = `,"provider":`
	LogModelMember    = `,"upstream_model":`
)

// Names are a deployment's names as a request's log line and usage
// record write them, made once with its backend (newNames) rather than
// for every request it answers. Each is given for a deployment only when
// made of that deployment's provider and model — most often the very
// strings, told by their address — and made afresh otherwise, so a
// missing or stale one costs time, never a wrong line or record.
type Names struct {
	members llm.Members // `,"provider":…,"upstream_model":…`, with what it was made of
	text    string      // the members' text, for Members (a Names that Checked returned)
	name    string      // "provider/model"
}

func newNames(d *provider.Deployment) Names {
	m := llm.MakeMembers(LogProviderMember, d.Provider, LogModelMember, d.Model)
	return Names{m, m.Text(LogProviderMember, d.Provider, LogModelMember, d.Model), d.Provider + "/" + d.Model}
}

// Checked returns n (which may be nil) when it was made of d's provider
// and model, nil otherwise. A caller that writes d's names more than
// once (a request's log line and its usage record) checks them once
// here and reads them with Members and Joined.
func (n *Names) Checked(d *provider.Deployment) *Names {
	if n == nil || n.members.Text(LogProviderMember, d.Provider, LogModelMember, d.Model) == "" {
		return nil
	}
	return n
}

// Members returns the log line's members of the deployment n was
// checked against (Checked), `,"provider":…,"upstream_model":…`
// (LogProviderMember, LogModelMember); "" for nil, for the caller to
// write them itself.
func (n *Names) Members() string {
	if n == nil {
		return ""
	}
	return n.text
}

// Joined returns d's "provider/model", as usage records name a
// deployment: made once when n is Checked(d), made here for nil.
func (n *Names) Joined(d *provider.Deployment) string {
	if n != nil {
		return n.name
	}
	return d.Provider + "/" + d.Model
}

// Backend is the live state of one deployment.
type Backend struct {
	Deployment *provider.Deployment
	// Names are the deployment's names as the log line and the usage
	// record of every request it answers write them, made once here.
	Names Names

	pool      *Pool
	br        breaker
	lat       latency
	tokens    atomic.Int64 // in-flight tokens (prompt + expected output)
	requests  atomic.Int64 // in-flight requests
	coolUntil atomic.Int64 // unix nanoseconds: a Retry-After the upstream asked for
	down      atomic.Bool  // the active health check fails
	signal    LoadSignal   // nil when the server's own load is not read
}

// InFlightTokens is the sum of the token costs of the requests this
// deployment is serving now.
func (b *Backend) InFlightTokens() int64 { return b.tokens.Load() }

// InFlightRequests is the number of requests this deployment is serving.
func (b *Backend) InFlightRequests() int64 { return b.requests.Load() }

// Breaker returns the breaker's state.
func (b *Backend) Breaker() BreakerState {
	s, _ := b.br.snapshot()
	return s
}

// Down reports whether the active health check fails.
func (b *Backend) Down() bool { return b.down.Load() }

// Latency returns the moving average of time to first byte and whether
// there is one.
func (b *Backend) Latency() (time.Duration, bool) {
	l, _, ok := b.lat.get()
	return l, ok
}

// Load returns the deployment's own load report, if a fresh one exists.
func (b *Backend) Load() (Load, bool) {
	if b.signal == nil {
		return Load{}, false
	}
	return b.signal.Load()
}

// usable reports whether selection may choose b without bypassing
// anything: not down, breaker allowing, no Retry-After pending.
func (b *Backend) usable(now time.Time) bool {
	return !b.down.Load() && b.br.available(now) && b.coolUntil.Load() <= now.UnixNano()
}

// blockedUntil orders unusable backends for the last resort: the one
// that failed longest ago (or whose Retry-After ends first) goes first.
func (b *Backend) blockedUntil() int64 {
	_, last := b.br.snapshot()
	t := last.UnixNano()
	if last.IsZero() {
		t = 0
	}
	return max(t, b.coolUntil.Load())
}

// coolFor keeps b out of selection for d (an upstream's Retry-After).
func (b *Backend) coolFor(now time.Time, d time.Duration) {
	until := now.Add(d).UnixNano()
	for {
		cur := b.coolUntil.Load()
		if cur >= until || b.coolUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// Lease is one attempt's hold on a deployment: its in-flight tokens and,
// if the breaker was half-open, the probe. Done must be called exactly
// once when the attempt is over.
type Lease struct {
	Backend    *Backend
	Deployment *provider.Deployment

	cost   int64 // prompt + expected reply, added to the in-flight tokens
	prompt int64 // the prompt's share of cost
	probe  bool
	done   atomic.Bool
	// relayed is the part of cost already taken off the deployment's
	// in-flight tokens while the attempt streamed (see Relayed).
	relayed atomic.Int64
}

// Relayed tells the lease that n more reply tokens reached the client:
// the deployment's in-flight tokens fall by as much, so least-tokens sees
// the work a stream has left rather than what it reserved at the start
// (bench/balance -simulate measures what that buys). The prompt's share
// stays counted until Done: the server holds it for the whole reply. A
// lease never gives back more than it took, and Relayed after Done does
// nothing.
func (l *Lease) Relayed(n int64) {
	if n <= 0 || l.done.Load() {
		return
	}
	for {
		cur := l.relayed.Load()
		give := min(n, l.cost-l.prompt-cur)
		if give <= 0 {
			return
		}
		if l.relayed.CompareAndSwap(cur, cur+give) {
			l.Backend.tokens.Add(-give)
			return
		}
	}
}

// Done releases the lease and feeds the outcome to the breaker and, on
// success, firstByte (time to the first token or byte) to the latency
// average. retryAfter > 0 keeps the deployment out of selection for that
// long.
func (l *Lease) Done(o Outcome, firstByte, retryAfter time.Duration) {
	if !l.done.CompareAndSwap(false, true) {
		return
	}
	b := l.Backend
	b.tokens.Add(-(l.cost - l.relayed.Swap(l.cost)))
	b.requests.Add(-1)
	now := b.pool.clock.Now()
	if retryAfter > 0 {
		b.coolFor(now, retryAfter)
	}
	if o == Success && firstByte > 0 {
		b.lat.add(now, firstByte)
	}
	if s, changed := b.br.record(now, o, l.probe); changed {
		b.pool.breakerChanged(b, s)
	}
}
