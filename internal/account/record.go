// Package account owns gatehouse's usage records: one Record per API
// request (refusals and failures included), carried off the request path
// by a bounded, batched Sink into a RecordStore, spilled to an
// append-only file while the store is unavailable and replayed, in
// order, when it returns. It also defines the queries the admin API and
// the CLI run over the records (Usage, Logs).
//
// account never imports a database driver or a store package: the
// stores implement its ports (RecordStore, Querier).
package account

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"gatehouse/internal/limit"
)

// UsageSource says where a record's token counts come from.
const (
	SourceReported  = "reported"  // the upstream's own usage
	SourceEstimated = "estimated" // counted by the gateway (no usage arrived, or the stream was cut)
)

// Cache results of a record, as the x-gatehouse-cache header says them.
const (
	CacheHit      = "hit"
	CacheSemantic = "semantic"
	CacheMiss     = "miss"
	CacheBypass   = "bypass" // the cache was not read
)

// Record is what one API request leaves behind. Its JSON form (the admin
// API, the CLI's --json, the spill file) is the contract the issue and
// docs/openapi.yaml fix; field names must not change.
type Record struct {
	RequestID string    `json:"request_id"` // unique: a replay never duplicates a record
	Time      time.Time `json:"time"`       // when the request arrived (UTC)
	Endpoint  string    `json:"endpoint"`   // the API path, e.g. /v1/chat/completions
	KeyID     string    `json:"key_id"`
	ProjectID string    `json:"project_id"` // "" for a static key's project, which lives in the config only
	Project   string    `json:"project"`    // the project's name
	Customer  string    `json:"customer"`   // the customer the request named (x-gatehouse-customer or user)
	// Model is the model as the client sent it; ServedModel the upstream
	// model that answered (after any downgrade or fallback).
	Model       string `json:"model"`
	ServedModel string `json:"served_model"`
	Provider    string `json:"provider"`   // the provider's configured name
	Deployment  string `json:"deployment"` // provider/served_model: which deployment answered
	Status      int    `json:"status"`     // the HTTP status the client got
	ErrorKind   string `json:"error_kind"` // "" on success

	PromptTokens     int          `json:"prompt_tokens"`
	CompletionTokens int          `json:"completion_tokens"`
	CachedTokens     int          `json:"cached_tokens"`
	ReasoningTokens  int          `json:"reasoning_tokens"`
	Cost             limit.Micros `json:"-"` // the cost_usd field: the x-gatehouse-cost-usd figure
	// Saved is what a cache hit would have cost (the stored answer's
	// cost when it was fetched): the saved_usd field; 0 otherwise.
	Saved       limit.Micros `json:"-"`
	UsageSource string       `json:"usage_source"`

	LatencyMS  float64 `json:"latency_ms"`
	TTFTMS     float64 `json:"ttft_ms"`     // streams: first chunk written; 0 otherwise
	OverheadMS float64 `json:"overhead_ms"` // gateway time before the answer, upstream waits excluded
	Cache      string  `json:"cache"`
	Attempts   int     `json:"attempts"`
	Stream     bool    `json:"stream"`

	Labels map[string]string `json:"labels"`

	// Bodies are kept only for projects with log_bodies on, redacted.
	RequestBody  string `json:"request_body,omitempty"`
	ResponseBody string `json:"response_body,omitempty"`
}

// recordJSON is Record's wire form: cost as a decimal string.
type recordJSON struct {
	*recordAlias
	CostUSD  string `json:"cost_usd"`
	SavedUSD string `json:"saved_usd"`
}

type recordAlias Record

// MarshalJSON writes cost_usd as the cost header writes it ("0.001250")
// and time in RFC 3339 (AppendJSON).
func (r Record) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil) }

// UnmarshalJSON reads what MarshalJSON writes (the spill file, the CLI):
// with readJSON when it can, else with encoding/json.
func (r *Record) UnmarshalJSON(b []byte) error {
	if r.readJSON(b) {
		return nil
	}
	return r.unmarshalByReflection(b)
}

// unmarshalByReflection is UnmarshalJSON with encoding/json, which reads
// every form of the record it ever wrote or will be given.
func (r *Record) unmarshalByReflection(b []byte) error {
	var v recordJSON
	v.recordAlias = (*recordAlias)(r)
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	c, err := ParseUSD(v.CostUSD)
	if err != nil {
		return fmt.Errorf("cost_usd: %w", err)
	}
	r.Cost = c
	if r.Saved, err = ParseUSD(v.SavedUSD); err != nil {
		return fmt.Errorf("saved_usd: %w", err)
	}
	return nil
}

// ParseUSD reads a decimal dollar amount with at most six decimals, as
// Micros.String writes it, exactly; "" is zero.
func ParseUSD(s string) (limit.Micros, error) {
	if s == "" {
		return 0, nil
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	whole, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			whole, frac = s[:i], s[i+1:]
			break
		}
	}
	if len(frac) > 6 || whole == "" {
		return 0, fmt.Errorf("invalid amount %q", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid amount %q", s)
	}
	var f int64
	if frac != "" {
		if f, err = strconv.ParseInt(frac, 10, 64); err != nil || f < 0 {
			return 0, fmt.Errorf("invalid amount %q", s)
		}
		for range 6 - len(frac) {
			f *= 10
		}
	}
	m := limit.Micros(w*1e6 + f)
	if neg {
		m = -m
	}
	return m, nil
}
