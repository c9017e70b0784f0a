package main

import (
	"fmt"
	"log/slog"
	"net/http"
	"regexp"

	"gatehouse/internal/account"
	"gatehouse/internal/admin"
	"gatehouse/internal/auth"
	"gatehouse/internal/config"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
	"gatehouse/internal/server"
)

// generation is one config turned into running parts: the runtime the
// server swaps in, and what to release when it is replaced.
type generation struct {
	runtime    *server.Runtime
	transports []*http.Transport
	discovery  *discovery // nil when no provider discovers models
	routing    *routing   // breakers, health checks and load signals of this generation
	warm       *prewarm   // connections opened when the generation starts
}

// close lets idle upstream connections of a replaced generation go;
// requests still using them finish undisturbed.
func (g *generation) close() {
	for _, t := range g.transports {
		t.CloseIdleConnections()
	}
}

// build wires a validated config into a runtime, over the stores the
// process opened once.
func build(cfg *config.Config, types *provider.Registry, bare bool, st *stores, log *slog.Logger) (*generation, error) {
	gen := &generation{warm: &prewarm{}}
	deployments := map[string]provider.Deployment{} // per provider, without model
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		d, t, err := providerDeployment(types, p)
		if err != nil {
			return nil, err
		}
		if t != nil {
			gen.transports = append(gen.transports, t)
		}
		deployments[p.Name] = d
		gen.warm.add(p, d)
	}
	gen.routing = newRouting(cfg, deployments)
	groups, err := gen.routing.groups(cfg, deployments)
	if err != nil {
		return nil, err
	}
	table := route.NewTable(groups)
	gen.discovery = newDiscovery(cfg, types, deployments, table)
	if gen.discovery != nil {
		gen.discovery.pool = gen.routing.pool
	}
	rt := &server.Runtime{
		Routes:       table,
		MaxBodyBytes: cfg.Server.MaxBodyBytes,
		ModelList:    server.ModelList(table),
	}
	if !bare {
		rt.Auth = &clientAuth{static: staticKeys(cfg.Keys), keys: st.keys, memo: st.memo}
		rt.LogRequests = cfg.Log.Requests == nil || *cfg.Log.Requests
		served := func(model string) bool { _, ok := table.Lookup(model); return ok }
		dashboard, err := st.dashboard(cfg, log)
		if err != nil {
			return nil, err
		}
		var sessions admin.SessionAuthorizer
		if dashboard != nil {
			rt.UI, sessions = dashboard, dashboard
		} else {
			rt.UIOff = dashboardOff(cfg, st)
		}
		adminAPI, err := st.adminHandler(cfg, rt.Auth, served, sessions, table, log)
		if err != nil {
			return nil, err
		}
		rt.Admin = adminAPI
		if st.cache != nil {
			x := cfg.Cache.Exact
			rt.Caching = &server.Caching{Cache: st.cache, Enabled: x.Enabled, TTL: x.TTL.D(),
				MaxEntryBytes: max(x.MaxBytes/8, 1)}
			if rt.Caching.Semantic, err = semantic(cfg.Cache.Semantic, deployments, st, log); err != nil {
				return nil, err
			}
		}
		rt.Responses = st.responseStore()
		if st.sink != nil {
			rt.Usage = st.sink
			rt.Bodies = bodyRedactor(cfg.Usage.Bodies)
		}
		if st.limiter != nil {
			prices, err := priceCatalog(cfg.Pricing, st.overlay())
			if err != nil {
				return nil, err
			}
			rt.Limits = &server.Limits{Admitter: st.limiter.admitter, Prices: prices,
				HeadersOnRefusal: cfg.Limits.Headers == config.RateLimitHeadersRefusals}
			if st.customers != nil {
				rt.Limits.Customers = st.customers
			}
		}
	}
	gen.runtime = rt
	return gen, nil
}

// semantic wires the semantic cache when the config names an embedder:
// the named provider's deployment of the embedder model, called through
// its adapter like any upstream. nil without an embedder.
func semantic(sc config.SemanticCache, deployments map[string]provider.Deployment, st *stores, log *slog.Logger) (*server.Semantic, error) {
	if sc.Embedder.Provider == "" {
		return nil, nil
	}
	d := deployments[sc.Embedder.Provider]
	d.Model = sc.Embedder.Model
	embed, err := server.NewEmbedder(d)
	if err != nil {
		return nil, fmt.Errorf("cache.semantic.embedder: %w", err)
	}
	return &server.Semantic{Index: st.semanticIndex(sc, log), Embed: embed, Enabled: sc.Enabled,
		Threshold: sc.Threshold, Timeout: sc.Timeout.D(), PerKey: sc.PerKey}, nil
}

// bodyRedactor builds the redaction of kept bodies from the config (its
// patterns were compiled once by validation).
func bodyRedactor(b config.Bodies) *account.Redactor {
	rules := make([]account.Rule, 0, len(b.Redact))
	for _, r := range b.Redact {
		rules = append(rules, account.Rule{Pattern: regexp.MustCompile(r.Pattern), Replace: r.Replace})
	}
	return account.NewRedactor(int(b.MaxBytes), rules)
}

func timeouts(t config.Timeouts) provider.Timeouts {
	return provider.Timeouts{Connect: t.Connect.D(), FirstByte: t.FirstByte.D(), Idle: t.Idle.D(), Total: t.Total.D()}
}

func staticKeys(keys []config.Key) *auth.Static {
	list := make([]auth.StaticKey, 0, len(keys))
	for _, k := range keys {
		p := auth.Principal{
			KeyID:   staticKeyID(k),
			Name:    k.Name,
			Project: k.Project,
			RPM:     k.RPM,
			TPM:     k.TPM,
			NoCache: k.NoCache,
		}
		p.ModelLimits = modelLimits(k.ModelLimits)
		if k.Budget != nil {
			p.Budget = &auth.Budget{USD: k.Budget.USD, Period: k.Budget.Period}
		}
		p.Models = nameSet(k.Models)
		p.Providers = nameSet(k.Providers)
		list = append(list, auth.StaticKey{Secret: k.Key, Principal: p})
	}
	return auth.NewStatic(list)
}

// nameSet is the set of a config key's allowed models or providers; nil
// (anything allowed) when the list is empty.
func nameSet(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// modelLimits converts a config key's rates per model; nil when none.
func modelLimits(m map[string]config.ModelLimit) map[string]auth.Limits {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]auth.Limits, len(m))
	for model, l := range m {
		out[model] = auth.Limits{RPM: l.RPM, TPM: l.TPM}
	}
	return out
}

// staticKeyID names a config key in logs without revealing it: its name if
// it has one, else a short prefix of its hash.
func staticKeyID(k config.Key) string {
	if k.Name != "" {
		return "static:" + k.Name
	}
	h := auth.HashKey(k.Key)
	return fmt.Sprintf("static:%x", h[:4])
}
