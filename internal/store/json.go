package store

import (
	"encoding/json"

	"gatehouse/internal/auth"
)

// Lists (allowed models) and maps (labels) are kept as JSON. An empty one
// is stored as "[]" or "{}" and read back as nil, so nil and empty
// round-trip alike and the contract can compare records whole.

// JSONList encodes a list for storage.
func JSONList(v []string) string {
	if len(v) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(v) // cannot fail for []string
	return string(b)
}

// JSONMap encodes a map for storage.
func JSONMap(v map[string]string) string {
	if len(v) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(v) // cannot fail for map[string]string
	return string(b)
}

// ParseList decodes a stored list; empty becomes nil.
func ParseList(s string) ([]string, error) {
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, nil
	}
	return v, nil
}

// ParseMap decodes a stored map; empty becomes nil.
func ParseMap(s string) (map[string]string, error) {
	var v map[string]string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, nil
	}
	return v, nil
}

// JSONModelLimits encodes a key's rates per model for storage.
func JSONModelLimits(v map[string]auth.Limits) string {
	if len(v) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(v) // cannot fail for a map of plain structs
	return string(b)
}

// ParseModelLimits decodes stored rates per model; empty becomes nil.
func ParseModelLimits(s string) (map[string]auth.Limits, error) {
	var v map[string]auth.Limits
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, nil
	}
	return v, nil
}

// NormProject, NormKey and NormCustomer bring a record about to be
// written to what reading it back will return (empty lists and maps as
// nil, times as the stores keep them), so a caller's record equals the
// stored one after a create or update.
func NormProject(p *auth.Project) {
	if len(p.Models) == 0 {
		p.Models = nil
	}
	if len(p.Providers) == 0 {
		p.Providers = nil
	}
	if p.Cache.IsZero() {
		p.Cache = nil
	}
	if len(p.Labels) == 0 {
		p.Labels = nil
	}
}

// NormKey: see NormProject.
func NormKey(k *auth.Key) {
	if len(k.Models) == 0 {
		k.Models = nil
	}
	if len(k.Providers) == 0 {
		k.Providers = nil
	}
	if len(k.Labels) == 0 {
		k.Labels = nil
	}
	if len(k.ModelLimits) == 0 {
		k.ModelLimits = nil
	}
	k.ExpiresAt = TimePtr(k.ExpiresAt)
	k.RevokedAt = TimePtr(k.RevokedAt)
	k.LastUsedAt = TimePtr(k.LastUsedAt)
}

// NormCustomer: see NormProject.
func NormCustomer(c *auth.Customer) {
	if len(c.Labels) == 0 {
		c.Labels = nil
	}
}

// CacheColumns are a project's cache override as the stores keep it, a
// column each, NULL following the config: the exact cache's on/off and
// TTL in seconds, the semantic cache's on/off and threshold.
func CacheColumns(c *auth.ProjectCache) [4]any {
	var cols [4]any
	if c == nil {
		return cols
	}
	if c.Exact.Enabled != nil {
		cols[0] = *c.Exact.Enabled
	}
	if c.Exact.TTLSeconds > 0 {
		cols[1] = int64(c.Exact.TTLSeconds)
	}
	if c.Semantic.Enabled != nil {
		cols[2] = *c.Semantic.Enabled
	}
	if c.Semantic.Threshold > 0 {
		cols[3] = c.Semantic.Threshold
	}
	return cols
}

// ProjectCacheOf is CacheColumns' inverse: nil when none is set.
func ProjectCacheOf(exact *bool, ttl *int64, semantic *bool, threshold *float64) *auth.ProjectCache {
	c := &auth.ProjectCache{Exact: auth.ExactCacheOverride{Enabled: exact},
		Semantic: auth.SemanticCacheOverride{Enabled: semantic}}
	if ttl != nil {
		c.Exact.TTLSeconds = int(*ttl)
	}
	if threshold != nil {
		c.Semantic.Threshold = *threshold
	}
	if c.IsZero() {
		return nil
	}
	return c
}
