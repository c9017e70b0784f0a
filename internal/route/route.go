// Package route maps the model name a client sends to the deployments that
// can serve it, picks one per attempt (select.go: one small Selector per
// strategy), runs a request's attempts with failover, retries and
// fallbacks (failover.go), and keeps each deployment's health: circuit
// breakers (breaker.go), active checks and load signals read from model
// servers (probe.go).
//
// It imports provider and llm only; it never imports a store or metrics
// (state changes reach metrics through hooks).
package route

import (
	"sync/atomic"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// Strategy names accepted in the config.
const (
	Failover      = "failover"
	RoundRobin    = "round-robin"
	Weighted      = "weighted"
	LeastTokens   = "least-tokens"
	LeastLatency  = "least-latency"
	LeastRequests = "least-requests"
)

// Routing modes: how a group treats deployments of providers marked
// local (Ollama, vLLM, llama.cpp boxes) against the others.
const (
	ModeAny        = "any"         // no preference: the strategy sees every deployment
	ModeLocalFirst = "local_first" // local deployments while any is allowed, then cloud ones
	ModeCloudFirst = "cloud_first" // cloud deployments first, local ones as the fallback
	ModeLocalOnly  = "local_only"  // never leave the local boxes
	ModeCloudOnly  = "cloud_only"  // never use the local boxes
)

// Spec describes a group to build.
type Spec struct {
	Name     string
	Strategy string
	Targets  []*provider.Deployment
	Weights  []int // per target; only the weighted strategy reads them
	Timeouts provider.Timeouts
	Retry    Retry
	Mode     string // a Mode* constant; "" is ModeAny
	// Fallbacks are models (by name) tried in order when every
	// deployment of this one failed.
	Fallbacks []string
	// ContextFallbacks are models tried when the prompt is too long for
	// this one: the provider said so, or the estimate exceeds MaxContext.
	ContextFallbacks []string
	// MaxContext is the model's context window in tokens; 0 = unknown.
	MaxContext int
	// Selector, when set, replaces the strategy's selector (benchmarks
	// compare policies with it, such as a least-connections one built on
	// Backend.InFlightRequests).
	Selector Selector
}

// Group is one client-facing model: its deployments, how to choose among
// them, and the timeouts and retries its upstream calls run under.
type Group struct {
	Name             string
	Strategy         string
	Targets          []*provider.Deployment
	Weights          []int
	Timeouts         provider.Timeouts
	Retry            Retry
	Mode             string
	Fallbacks        []string
	ContextFallbacks []string
	MaxContext       int
	// QuotedName is Name as a JSON string, made once here for the log
	// line of every request that names the group.
	QuotedName llm.Quoted

	pool  *Pool
	sel   Selector
	tiers [][]Member // by routing mode: the first tier with an allowed member is chosen from
}

// NewGroup builds a group on a pool of its own, with default retries. A
// target's weight matters only to the weighted strategy, where 0 keeps a
// target out of rotation (a standby).
func NewGroup(name, strategy string, targets []*provider.Deployment, weights []int, t provider.Timeouts) *Group {
	return NewPool(PoolOptions{}).Group(Spec{Name: name, Strategy: strategy, Targets: targets, Weights: weights, Timeouts: t})
}

// Group builds a group whose deployments share this pool's state.
func (p *Pool) Group(s Spec) *Group {
	g := &Group{
		Name: s.Name, Strategy: s.Strategy, Targets: s.Targets, Weights: make([]int, len(s.Targets)),
		Timeouts: s.Timeouts, Retry: s.Retry, Mode: s.Mode, Fallbacks: s.Fallbacks,
		ContextFallbacks: s.ContextFallbacks, MaxContext: s.MaxContext,
		QuotedName: llm.Quote(s.Name), pool: p, sel: s.Selector,
	}
	if g.sel == nil {
		g.sel = NewSelector(s.Strategy, p.rand, p.explore)
	}
	if g.Mode == "" {
		g.Mode = ModeAny
	}
	var local, cloud []Member
	for i, d := range s.Targets {
		if i < len(s.Weights) && s.Weights[i] > 0 {
			g.Weights[i] = s.Weights[i]
		}
		m := Member{Backend: p.Backend(d), Weight: g.Weights[i]}
		if d.Local {
			local = append(local, m)
		} else {
			cloud = append(cloud, m)
		}
	}
	switch g.Mode {
	case ModeLocalFirst:
		g.tiers = nonEmpty(local, cloud)
	case ModeCloudFirst:
		g.tiers = nonEmpty(cloud, local)
	case ModeLocalOnly:
		g.tiers = nonEmpty(local)
	case ModeCloudOnly:
		g.tiers = nonEmpty(cloud)
	default:
		all := make([]Member, 0, len(s.Targets))
		for i, d := range s.Targets {
			all = append(all, Member{Backend: p.Backend(d), Weight: g.Weights[i]})
		}
		g.tiers = nonEmpty(all)
	}
	return g
}

func nonEmpty(tiers ...[]Member) [][]Member {
	out := tiers[:0]
	for _, t := range tiers {
		if len(t) > 0 {
			out = append(out, t)
		}
	}
	return out
}

// Pool returns the pool the group's deployments live in.
func (g *Group) Pool() *Pool { return g.pool }

// Members lists the deployments the routing mode allows, in the order
// they are preferred.
func (g *Group) Members() []Member {
	var out []Member
	for _, t := range g.tiers {
		out = append(out, t...)
	}
	return out
}

// Pick chooses the deployment for one attempt among those not in tried,
// acquires cost in-flight tokens on it and returns the lease, which the
// caller must end with Done. Deployments whose breaker is open, whose
// health check fails or whose Retry-After runs are skipped; when only such
// ones are left and lastResort is set, the one that failed longest ago is
// chosen. ok is false when nothing can be chosen.
func (g *Group) Pick(tried []*Backend, cost int64, lastResort bool) (*Lease, bool) {
	p := g.pool
	now := p.clock.Now()
	p.mu.Lock()
	var chosen *Backend
	for _, tier := range g.tiers {
		cands := p.scratch[:0]
		for _, m := range tier {
			if !contains(tried, m.Backend) && m.usable(now) {
				cands = append(cands, m)
			}
		}
		p.scratch = cands[:0]
		if len(cands) > 0 {
			chosen = cands[g.sel.Select(cands, cost)].Backend
			break
		}
	}
	if chosen == nil && lastResort {
		var best int64
		for _, tier := range g.tiers {
			for _, m := range tier {
				if contains(tried, m.Backend) {
					continue
				}
				if t := m.blockedUntil(); chosen == nil || t < best {
					chosen, best = m.Backend, t
				}
			}
		}
	}
	if chosen == nil {
		p.mu.Unlock()
		return nil, false
	}
	chosen.tokens.Add(cost)
	chosen.requests.Add(1)
	probe, changed := chosen.br.take(now) // under the lock: one probe per half-open breaker
	p.mu.Unlock()

	l := &Lease{Backend: chosen, Deployment: chosen.Deployment, cost: cost, probe: probe}
	if changed {
		p.breakerChanged(chosen, HalfOpen)
	}
	return l, true
}

func contains(list []*Backend, b *Backend) bool {
	for _, x := range list {
		if x == b {
			return true
		}
	}
	return false
}

// Table is the model table of one config generation. The configured
// groups never change; the discovered ones (see Discovered) are swapped
// in whole while the generation lives.
type Table struct {
	groups     map[string]*Group
	order      []*Group
	discovered atomic.Pointer[Discovered]
}

// NewTable indexes groups by name, keeping config order for listings.
func NewTable(groups []*Group) *Table {
	t := &Table{groups: make(map[string]*Group, len(groups)), order: groups}
	for _, g := range groups {
		t.groups[g.Name] = g
	}
	return t
}

// Lookup finds the group for a client-facing model name: a configured
// one, else a discovered one.
func (t *Table) Lookup(model string) (*Group, bool) {
	if g, ok := t.groups[model]; ok {
		return g, true
	}
	if d := t.discovered.Load(); d != nil {
		g, ok := d.groups[model]
		return g, ok
	}
	return nil, false
}

// Groups lists the groups in config order.
func (t *Table) Groups() []*Group { return t.order }

// WantsPromptTokens reports whether picking for this group uses the
// prompt's token count (least-tokens, or a known context window), so the
// request path counts it only then.
func (g *Group) WantsPromptTokens() bool {
	return g.Strategy == LeastTokens || g.MaxContext > 0
}
