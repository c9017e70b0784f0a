package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync"

	"gatehouse/internal/config"
	"gatehouse/internal/metrics"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// routing is the resilience side of one config generation: the pool of
// deployment state (breakers, latency, in-flight tokens) its groups share,
// and the background probes (active health checks, load signals) it owns.
// The probes run from start until stop, never on the request path.
type routing struct {
	pool    *route.Pool
	checks  []*route.HealthCheck
	pollers []loadPoller
	metrics *metrics.Metrics // set by instrument before the generation serves

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// loadPoller is the load signal of one provider.
type loadPoller struct {
	provider string
	*route.MetricsPoller
}

func newRouting(cfg *config.Config, deployments map[string]provider.Deployment) *routing {
	r := &routing{}
	b := cfg.Breaker
	r.pool = route.NewPool(route.PoolOptions{
		Breaker: route.BreakerConfig{Failures: b.Failures, ErrorRate: b.ErrorRate, MinRequests: b.MinRequests,
			Window: b.Window.D(), Cooldown: b.Cooldown.D()},
		OnBreaker: func(d *provider.Deployment, s route.BreakerState) {
			r.metrics.Breaker(d.Provider, d.Model, int(s), s.String(), true)
		},
	})
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		d := deployments[p.Name]
		if h := p.HealthCheck; h != nil {
			r.checks = append(r.checks, &route.HealthCheck{Pool: r.pool, Provider: p.Name, URL: serverRoot(d.BaseURL) + h.Path,
				Client: d.Client, Interval: h.Interval.D(), Timeout: h.Timeout.D()})
		}
		if l := p.Load; l != nil {
			running, waiting, kv, _ := route.LoadMetrics(l.Kind)
			u := l.URL
			if u == "" {
				u = serverRoot(d.BaseURL) + "/metrics"
			}
			r.pollers = append(r.pollers, loadPoller{p.Name, &route.MetricsPoller{URL: u, Client: d.Client,
				Interval: l.Interval.D(), Running: running, Waiting: waiting, KVCache: kv}})
		}
	}
	return r
}

// serverRoot is the scheme and host of a base URL: where health and
// metrics endpoints live, whatever API path the base URL has.
func serverRoot(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	return u.Scheme + "://" + u.Host
}

// groups builds the configured models' groups on the generation's pool.
func (r *routing) groups(cfg *config.Config, deployments map[string]provider.Deployment) ([]*route.Group, error) {
	groups := make([]*route.Group, 0, len(cfg.Models))
	for i := range cfg.Models {
		m := &cfg.Models[i]
		targets := make([]*provider.Deployment, 0, len(m.Targets))
		weights := make([]int, 0, len(m.Targets))
		for _, t := range m.Targets {
			base, ok := deployments[t.Provider]
			if !ok {
				return nil, fmt.Errorf("model %q: unknown provider %q", m.Name, t.Provider)
			}
			d := base
			d.Model = t.Model
			targets = append(targets, &d)
			weights = append(weights, t.Weight)
		}
		groups = append(groups, r.pool.Group(route.Spec{
			Name: m.Name, Strategy: m.Strategy, Targets: targets, Weights: weights,
			Timeouts:  timeouts(m.EffectiveTimeouts(cfg.Timeouts)),
			Retry:     retry(m.EffectiveRetry(cfg.Retry)),
			Mode:      m.EffectiveMode(cfg.Routing),
			Fallbacks: m.Fallbacks, ContextFallbacks: m.ContextFallbacks, MaxContext: m.MaxContext,
		}))
	}
	// Load signals apply to the backends the groups just created.
	for _, p := range r.pollers {
		r.pool.SetLoadSignal(p.provider, p.MetricsPoller)
	}
	return groups, nil
}

func retry(r config.Retry) route.Retry {
	return route.Retry{MaxAttempts: r.MaxAttempts, Backoff: r.Backoff.D(), MaxBackoff: r.MaxBackoff.D(), RetryOn: r.RetryOn}
}

// instrument hands the process's metrics (nil for a bare proxy) to the
// generation before it serves: requests and attempts through the
// runtime, breaker states and health checks through the routing hooks.
func (g *generation) instrument(m *metrics.Metrics) {
	g.runtime.Metrics = m
	r := g.routing
	r.metrics = m
	for _, b := range r.pool.Backends() {
		m.Breaker(b.Deployment.Provider, b.Deployment.Model, int(b.Breaker()), b.Breaker().String(), false)
		if d := b.Deployment.Dialer; d != nil && m != nil {
			name := b.Deployment.Provider
			d.OnRetry(func(err error) { m.ConnectRetry(name, provider.DialCause(err)) })
		}
	}
	for _, h := range r.checks {
		m.HealthCheck(h.Provider, false)
	}
	pool := r.pool
	m.Deployments(func() []metrics.DeploymentLoad {
		bs := pool.Backends()
		out := make([]metrics.DeploymentLoad, len(bs))
		for i, b := range bs {
			out[i] = metrics.DeploymentLoad{Provider: b.Deployment.Provider, Model: b.Deployment.Model,
				Requests: b.InFlightRequests(), Tokens: b.InFlightTokens()}
		}
		return out
	})
}

// forgetRemoved drops the metric series of the deployments and providers
// old served and g no longer does.
func (g *generation) forgetRemoved(old *generation, m *metrics.Metrics) {
	kept := map[[2]string]bool{}
	providers := map[string]bool{}
	for _, b := range g.routing.pool.Backends() {
		kept[[2]string{b.Deployment.Provider, b.Deployment.Model}] = true
		providers[b.Deployment.Provider] = true
	}
	for _, h := range g.routing.checks {
		providers[h.Provider] = true
	}
	for _, b := range old.routing.pool.Backends() {
		d := b.Deployment
		if !kept[[2]string{d.Provider, d.Model}] {
			m.Forget(d.Provider, d.Model)
		}
		if !providers[d.Provider] {
			m.ForgetProvider(d.Provider)
		}
	}
	for _, h := range old.routing.checks {
		if !providers[h.Provider] {
			m.ForgetProvider(h.Provider)
		}
	}
}

// start runs the probes under ctx.
func (r *routing) start(ctx context.Context, log *slog.Logger) {
	if len(r.checks) == 0 && len(r.pollers) == 0 {
		return
	}
	ctx, r.cancel = context.WithCancel(ctx)
	for _, h := range r.checks {
		h.OnChange = func(down bool, err error) {
			r.metrics.HealthCheck(h.Provider, down)
			if down {
				log.Warn("health check failing: provider taken out of selection", "provider", h.Provider, "error", fmt.Sprint(err))
			} else {
				log.Info("health check passing again", "provider", h.Provider)
			}
		}
		r.wg.Go(func() { h.Run(ctx) })
	}
	for _, p := range r.pollers {
		p.OnError = func(err error) { log.Debug("load signal poll failed", "url", p.URL, "error", err.Error()) }
		r.wg.Go(func() { p.Run(ctx) })
	}
}

// stop ends the probes and waits for them; safe to call more than once
// and before start.
func (r *routing) stop() {
	r.once.Do(func() {
		if r.cancel != nil {
			r.cancel()
			r.wg.Wait()
		}
	})
}
