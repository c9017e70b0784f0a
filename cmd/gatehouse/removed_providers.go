package main

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/config"
)

// removedProvidersTimeout bounds reading every stored key and project
// after a reload: the warning is worth waiting for, a reload stuck on a
// slow database is not.
const removedProvidersTimeout = 10 * time.Second

// providerNames are the names of cfg's providers.
func providerNames(cfg *config.Config) map[string]bool {
	m := make(map[string]bool, len(cfg.Providers))
	for _, p := range cfg.Providers {
		m[p.Name] = true
	}
	return m
}

// removedProviders are the names in before that now lacks, sorted.
func removedProviders(before, now map[string]bool) []string {
	var out []string
	for name := range before {
		if !now[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// warnRemovedProviders logs how many active stored keys and projects
// still allow one of the providers a reload removed. The config's own
// keys are checked when it loads; the stored ones are not (the admin API
// checked them against the config of its day), and their requests now
// find the provider gone: a key allowed only removed providers reaches
// no deployment. Counts and provider names only: no key is named.
func warnRemovedProviders(ctx context.Context, store auth.Store, removed []string, now time.Time, log *slog.Logger) {
	if len(removed) == 0 || store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, removedProvidersTimeout)
	defer cancel()
	names := func(list []string) bool {
		return slices.ContainsFunc(list, func(p string) bool { return slices.Contains(removed, p) })
	}
	keys, projects := 0, 0
	for pg := (auth.Page{}); ; {
		page, err := store.Keys(ctx, "", pg)
		if err != nil {
			log.Warn("providers removed by the reload; could not check the stored keys for them", "providers", removed, "error", err.Error())
			return
		}
		for i := range page {
			if page[i].Active(now) && names(page[i].Providers) {
				keys++
			}
		}
		if len(page) == 0 {
			break
		}
		pg.After = page[len(page)-1].ID
	}
	for pg := (auth.Page{}); ; {
		page, err := store.Projects(ctx, pg)
		if err != nil {
			log.Warn("providers removed by the reload; could not check the stored projects for them", "providers", removed, "error", err.Error())
			return
		}
		for i := range page {
			if names(page[i].Providers) {
				projects++
			}
		}
		if len(page) == 0 {
			break
		}
		pg.After = page[len(page)-1].ID
	}
	if keys > 0 || projects > 0 {
		log.Warn("providers removed from the config are still allowed to stored keys or projects: their requests can no longer go there",
			"providers", removed, "keys", keys, "projects", projects)
	}
}
