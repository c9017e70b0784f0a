package route

import "time"

// ModelState is what an operator sees of one model's routing: a copy of
// its live state, safe to hold and serialise (no locks, no pointers into
// the router).
type ModelState struct {
	Name        string
	Strategy    string
	Mode        string
	Fallbacks   []string
	Discovered  bool // found by model discovery rather than configured
	Deployments []DeploymentState
}

// DeploymentState is one deployment's live state at the snapshot's time.
type DeploymentState struct {
	Provider, Type, Model string
	Local                 bool
	Weight                int  // 0 when the strategy does not weigh
	Allowed               bool // the model's routing mode lets it be chosen
	Down                  bool // the active health check fails
	// HealthChecked says the provider's active health check has reported
	// (so !Down means it passes); false without a health check, or before
	// its first result.
	HealthChecked bool
	Breaker       BreakerState
	// BreakerSince is when the breaker last opened (Open and HalfOpen).
	BreakerSince time.Time
	// BreakerUntil is when an Open breaker lets a probe through.
	BreakerUntil time.Time
	// CoolingUntil is a Retry-After the upstream asked for, while it runs.
	CoolingUntil time.Time
	// Latency is the moving average of time to first byte; HasLatency is
	// false before the first sample.
	Latency    time.Duration
	HasLatency bool
	// Attempts and Failures are counted over the breaker's error-rate
	// window; Window is 0 when the breaker keeps no window (no error-rate
	// rule), and the counts are then zero.
	Attempts, Failures int
	Window             time.Duration
	InFlightRequests   int64
	InFlightTokens     int64
}

// Snapshot copies the live state of every model the table routes:
// configured ones in config order, then discovered ones.
func (t *Table) Snapshot() []ModelState {
	out := make([]ModelState, 0, len(t.order))
	for _, g := range t.order {
		out = append(out, g.snapshot(false))
	}
	for _, g := range t.Discovered() {
		out = append(out, g.snapshot(true))
	}
	return out
}

func (g *Group) snapshot(discovered bool) ModelState {
	m := ModelState{Name: g.Name, Strategy: g.Strategy, Mode: g.Mode, Fallbacks: g.Fallbacks, Discovered: discovered,
		Deployments: make([]DeploymentState, 0, len(g.Targets))}
	allowed := map[*Backend]bool{}
	for _, mb := range g.Members() {
		allowed[mb.Backend] = true
	}
	now := g.pool.clock.Now()
	for i, d := range g.Targets {
		b := g.pool.Backend(d)
		s := b.state(now)
		s.Weight, s.Allowed, s.HealthChecked = g.Weights[i], allowed[b], g.pool.healthChecked(d.Provider)
		m.Deployments = append(m.Deployments, s)
	}
	return m
}

// State copies the live state of the model a client reaches with this
// name: a configured one, a discovered one, or a discovered one's alias
// (such as "llama3.2" for "llama3.2:latest", which Snapshot does not
// list). ok is false when no model has the name.
func (t *Table) State(model string) (ModelState, bool) {
	g, ok := t.Lookup(model)
	if !ok {
		return ModelState{}, false
	}
	_, configured := t.groups[model]
	return g.snapshot(!configured), true
}

// healthChecked reports whether a health check of the provider has told
// the pool its result.
func (p *Pool) healthChecked(providerName string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.down[providerName]
	return ok
}

// state copies b's live state.
func (b *Backend) state(now time.Time) DeploymentState {
	d := b.Deployment
	s := DeploymentState{Provider: d.Provider, Type: d.Type, Model: d.Model, Local: d.Local, Down: b.Down(),
		InFlightRequests: b.InFlightRequests(), InFlightTokens: b.InFlightTokens()}
	s.Latency, s.HasLatency = b.Latency()
	if until := time.Unix(0, b.coolUntil.Load()); b.coolUntil.Load() != 0 && until.After(now) {
		s.CoolingUntil = until
	}
	br := &b.br
	br.mu.Lock()
	defer br.mu.Unlock()
	s.Breaker = br.state
	if br.state != Closed {
		s.BreakerSince = br.openedAt
		if br.state == Open {
			s.BreakerUntil = br.openedAt.Add(br.cfg.Cooldown)
		}
	}
	if br.cfg.Window > 0 {
		s.Window = br.cfg.Window
		for _, bk := range br.buckets {
			if now.Sub(bk.start) < br.cfg.Window {
				s.Attempts += bk.ok + bk.fails
				s.Failures += bk.fails
			}
		}
	}
	return s
}
