package account

import (
	"math"
	"time"

	"gatehouse/internal/llm"
)

// RollupRow is what a batch of records adds to one row of a store's
// hourly rollup (usage_hourly): the sums and latency counts of its
// records of one hour and combination.
type RollupRow struct {
	Hour                            int64 // the hour's start, in Unix microseconds
	KeyID, Project, Model, Provider string
	// ProjectID is the greatest of the records' project ids (one
	// project name has one id; the greatest is what SQL's max keeps).
	ProjectID                                                string
	Requests, Errors, Prompt, Completion, Cached, Cost, Hits int64
	// Latency counts every record's latency, TTFT the time to first
	// token of streamed records that have one.
	Latency, TTFT LatencyCounts
}

// rollupKey is a RollupRow's hour and combination.
type rollupKey struct {
	hour                            int64
	keyID, project, model, provider string
}

// Rollup sums rs (those marked in keep, when it is not nil) per hour and
// combination, the rows in the order their first records come, so that
// replicas' batches touch rows in the same order and a run is
// reproducible. Latencies count as the stores keep them: NaN and ±Inf
// as 0.
func Rollup(rs []Record, keep []bool) []RollupRow {
	const hour = int64(time.Hour / time.Microsecond)
	var rows []RollupRow
	index := make(map[rollupKey]int, 4)
	// A batch's records mostly repeat the previous one's combination
	// (one key calling one model, within the hour): that case compares
	// the combination with the last one's, where the map would hash its
	// four strings.
	last := -1
	var lastKey rollupKey
	for i := range rs {
		if keep != nil && !keep[i] {
			continue
		}
		r := &rs[i]
		t := r.Time.UnixMicro()
		k := rollupKey{t - t%hour, r.KeyID, r.Project, r.Model, r.Provider}
		if last < 0 || k != lastKey {
			j, ok := index[k]
			if !ok {
				j = len(rows)
				index[k] = j
				rows = append(rows, RollupRow{Hour: k.hour, KeyID: k.keyID, Project: k.project, Model: k.model,
					Provider: k.provider, ProjectID: r.ProjectID})
			}
			last, lastKey = j, k
		}
		h := &rows[last]
		if !llm.SameString(r.ProjectID, h.ProjectID) { // nearly always the very string
			h.ProjectID = max(h.ProjectID, r.ProjectID)
		}
		h.Requests++
		if r.Status >= 400 {
			h.Errors++
		}
		h.Prompt += int64(r.PromptTokens)
		h.Completion += int64(r.CompletionTokens)
		h.Cached += int64(r.CachedTokens)
		h.Cost += int64(r.Cost)
		if r.Cache == CacheHit || r.Cache == CacheSemantic {
			h.Hits++
		}
		h.Latency.Add(storedMS(r.LatencyMS))
		if ttft := storedMS(r.TTFTMS); r.Stream && ttft > 0 {
			h.TTFT.Add(ttft)
		}
	}
	return rows
}

// storedMS is a duration as the stores keep it: NaN and ±Inf as 0.
func storedMS(ms float64) float64 {
	if math.IsNaN(ms) || math.IsInf(ms, 0) {
		return 0
	}
	return ms
}
