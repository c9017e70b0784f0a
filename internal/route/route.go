// Package route maps the model name a client sends to the deployments that
// can serve it, and picks one per request.
//
// It never imports a store; health, breakers and token-aware policies
// build on Group.
package route

import (
	"math/rand/v2"
	"sync/atomic"

	"gatehouse/internal/provider"
)

// Strategy names accepted in the config.
const (
	Failover     = "failover"
	RoundRobin   = "round-robin"
	Weighted     = "weighted"
	LeastTokens  = "least-tokens"
	LeastLatency = "least-latency"
)

// Group is one client-facing model: its deployments, how to choose among
// them, and the timeouts its upstream calls run under.
type Group struct {
	Name     string
	Strategy string
	Targets  []*provider.Deployment
	Weights  []int
	Timeouts provider.Timeouts

	next        atomic.Uint64
	totalWeight int
}

// NewGroup builds a group. A target's weight matters only to the weighted
// strategy, where 0 keeps a target out of rotation (a standby).
func NewGroup(name, strategy string, targets []*provider.Deployment, weights []int, t provider.Timeouts) *Group {
	g := &Group{Name: name, Strategy: strategy, Targets: targets, Weights: make([]int, len(targets)), Timeouts: t}
	for i := range targets {
		if i < len(weights) && weights[i] > 0 {
			g.Weights[i] = weights[i]
			g.totalWeight += weights[i]
		}
	}
	return g
}

// Pick returns the deployment for the next request. Strategies that need
// live load signals (least-tokens, least-latency) choose by priority until
// those signals exist.
func (g *Group) Pick() *provider.Deployment {
	if len(g.Targets) == 1 {
		return g.Targets[0]
	}
	switch g.Strategy {
	case RoundRobin:
		return g.Targets[(g.next.Add(1)-1)%uint64(len(g.Targets))]
	case Weighted:
		if g.totalWeight == 0 {
			break
		}
		n := rand.IntN(g.totalWeight)
		for i, w := range g.Weights {
			if n < w {
				return g.Targets[i]
			}
			n -= w
		}
	}
	return g.Targets[0]
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
