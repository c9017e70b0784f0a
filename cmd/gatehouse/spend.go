package main

import (
	"context"
	"time"

	"gatehouse/internal/admin"
	"gatehouse/internal/auth"
	"gatehouse/internal/config"
	"gatehouse/internal/limit"
	"gatehouse/internal/server"
	"gatehouse/internal/store/redis"
)

// spendTimeout bounds one page's spend lookup in Redis: past it the admin
// API answers the records without their spend rather than hang on a
// Redis that is down.
const spendTimeout = 2 * time.Second

// budgetSpend is admin.Budgets over the process's admitter: the counters
// admission checks and reserves in, so the admin API shows exactly what
// the next request is held to. Embedded mode reads the in-process
// counters; cluster mode reads Redis, which every replica admits into,
// in one pipelined round trip per page. It never reads a Fallback's local
// limiter: what replicas let through on their own while Redis was
// unreachable is not in Redis's counters (see limit.Fallback), and while
// it stays unreachable the admin API answers without spend.
type budgetSpend struct {
	embedded *limit.Embedded // embedded mode
	redis    *redis.Limiter  // cluster mode
	// tags are the hash tags the config's keys are counted under, by key
	// ID. A stored record's counters carry its project's ID; a config
	// key's principal has no project ID, so its requests are counted
	// under a tag made of its project's name (see the server's
	// PrincipalTag).
	tags map[string]string
}

// withKeys is s with the tags of the config's keys, for one config
// generation's admin API; nil when s is.
func (s *budgetSpend) withKeys(keys []config.Key) admin.Budgets {
	if s == nil {
		return nil
	}
	c := *s
	c.tags = make(map[string]string, len(keys))
	for _, k := range keys {
		c.tags[staticKeyID(k)] = staticTag(k)
	}
	return &c
}

// staticTag is the tag of a config key's requests: the server's tag of
// its principal, whose ProjectID is empty.
func staticTag(k config.Key) string {
	return server.PrincipalTag(&auth.Principal{KeyID: staticKeyID(k), Project: k.Project})
}

// Spent implements admin.Budgets.
func (s *budgetSpend) Spent(ctx context.Context, refs []admin.BudgetRef, t time.Time) ([]limit.Micros, error) {
	if s.redis == nil {
		out := make([]limit.Micros, len(refs))
		for i, r := range refs {
			out[i] = s.embedded.Spent(r.Scope, r.ID, r.Period, t)
		}
		return out, nil
	}
	keys := make([]limit.BudgetKey, len(refs))
	for i, r := range refs {
		tag := r.ProjectID
		if st, ok := s.tags[r.ID]; ok && r.Scope == limit.ScopeKey {
			tag = st
		}
		start, _ := r.Period.Span(t)
		keys[i] = limit.BudgetKey{Tag: tag, Scope: r.Scope, ID: r.ID, Period: r.Period, Start: start}
	}
	ctx, cancel := context.WithTimeout(ctx, spendTimeout)
	defer cancel()
	return s.redis.SpentMany(ctx, keys)
}
