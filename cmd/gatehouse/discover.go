package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"gatehouse/internal/config"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
)

// Model discovery makes every model a provider serves routable by name
// without a models entry — for Ollama, every model pulled on the box. Each
// discovered model answers to its own name (llama3.2:latest, and
// llama3.2 for a :latest tag) and to "<provider>/<name>"; a name served by
// several providers is one failover group of them in config order. A
// configured model of the same name always wins.

const (
	// discoveryInterval is how often providers are asked again: a model
	// pulled on a box becomes routable within it.
	discoveryInterval = 30 * time.Second
	// discoveryTimeout bounds one provider's answer, so a box that hangs
	// holds up neither the start nor the next poll for long.
	discoveryTimeout = 5 * time.Second
)

// discoverSource is one provider whose models are discovered.
type discoverSource struct {
	base   provider.Deployment // the provider's deployment, without a model
	lister provider.Discoverer
}

// discovery polls the discovering providers of one config generation and
// swaps what they list into the generation's route table. It is owned by
// the generation: start runs the first poll and then polls in the
// background until stop (or the context given to start ends); a failed
// poll logs a warning and keeps that provider's last known models.
type discovery struct {
	table    *route.Table
	pool     *route.Pool // build gives it the generation's, so discovered models share its breakers
	sources  []discoverSource
	timeouts provider.Timeouts
	retry    route.Retry
	mode     string
	interval time.Duration

	log    *slog.Logger
	known  map[string][]string // provider name → its last list; used by one goroutine at a time
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// newDiscovery returns the discovery for the providers of cfg that have
// it, or nil when none does.
func newDiscovery(cfg *config.Config, types *provider.Registry, deployments map[string]provider.Deployment, table *route.Table) *discovery {
	d := &discovery{table: table, pool: route.NewPool(route.PoolOptions{}), interval: discoveryInterval, known: map[string][]string{},
		timeouts: timeouts((&config.Model{}).EffectiveTimeouts(cfg.Timeouts)),
		retry:    retry(cfg.Retry), mode: (&config.Model{}).EffectiveMode(cfg.Routing)}
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		base := deployments[p.Name]
		if types.Discovers(&base, p.Discover) {
			d.sources = append(d.sources, discoverSource{base: base, lister: base.Adapter.(provider.Discoverer)})
		}
	}
	if len(d.sources) == 0 {
		return nil
	}
	return d
}

// start polls once, so the models are routable when the gateway starts
// serving, then keeps polling under ctx.
func (d *discovery) start(ctx context.Context, log *slog.Logger) {
	ctx, d.cancel = context.WithCancel(ctx)
	d.log, d.done = log, make(chan struct{})
	d.poll(ctx, true)
	go d.loop(ctx)
}

func (d *discovery) loop(ctx context.Context) {
	defer close(d.done)
	t := time.NewTicker(d.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.poll(ctx, false)
		}
	}
}

// stop ends the polling and waits for it. It may be called more than once,
// and before start.
func (d *discovery) stop() {
	d.once.Do(func() {
		if d.cancel != nil {
			d.cancel()
			<-d.done
		}
	})
}

// poll asks every source and swaps in a new set when a list changed.
func (d *discovery) poll(ctx context.Context, first bool) {
	changed := first
	for i := range d.sources {
		src := &d.sources[i]
		name := src.base.Provider
		models, err := d.list(ctx, src)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.log.Warn("model discovery failed; keeping the models last seen", "provider", name,
				"models", len(d.known[name]), "error", err.Error())
			continue
		}
		if !slices.Equal(models, d.known[name]) {
			d.known[name], changed = models, true
			d.log.Info("discovered models", "provider", name, "models", strings.Join(models, ","))
		}
	}
	if changed {
		d.table.SetDiscovered(d.build())
	}
}

func (d *discovery) list(ctx context.Context, src *discoverSource) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	req, err := src.lister.ModelsRequest(ctx, &src.base)
	if err != nil {
		return nil, err
	}
	resp, err := src.base.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, src.base.Adapter.Error(resp, &src.base)
	}
	return src.lister.Models(resp, &src.base)
}

// build turns the known lists into route groups.
func (d *discovery) build() *route.Discovered {
	var order []string
	byName := map[string][]*provider.Deployment{}
	var qualified, aliases []*route.Group
	group := func(name string, targets []*provider.Deployment) *route.Group {
		return d.pool.Group(route.Spec{Name: name, Strategy: route.Failover, Targets: targets, Timeouts: d.timeouts,
			Retry: d.retry, Mode: d.mode})
	}
	for i := range d.sources {
		src := &d.sources[i]
		for _, m := range d.known[src.base.Provider] {
			dep := src.base
			dep.Model = m
			if _, seen := byName[m]; !seen {
				order = append(order, m)
			}
			byName[m] = append(byName[m], &dep)
			own := []*provider.Deployment{&dep}
			qualified = append(qualified, group(src.base.Provider+"/"+m, own))
			if short, ok := strings.CutSuffix(m, ":latest"); ok {
				aliases = append(aliases, group(src.base.Provider+"/"+short, own))
			}
		}
	}
	groups := make([]*route.Group, 0, len(order)+len(qualified))
	for _, m := range order {
		groups = append(groups, group(m, byName[m]))
		if short, ok := strings.CutSuffix(m, ":latest"); ok {
			aliases = append(aliases, group(short, byName[m]))
		}
	}
	return route.NewDiscovered(append(groups, qualified...), aliases)
}

// start begins the generation's background work under ctx.
func (g *generation) start(ctx context.Context, log *slog.Logger) {
	if g.discovery != nil {
		g.discovery.start(ctx, log)
	}
	g.routing.start(ctx, log)
	g.warm.start(ctx, log)
}

// stop ends the generation's background work and waits for it.
func (g *generation) stop() {
	if g.discovery != nil {
		g.discovery.stop()
	}
	g.routing.stop()
	g.warm.stop()
}
