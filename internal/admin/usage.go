package admin

import (
	"encoding/csv"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/llm"
)

// defaultWindow is the usage API's window when from is not given.
const defaultWindow = 24 * time.Hour

// The query parameters of the usage and log endpoints.
var (
	filterParams = []string{"from", "to", "key", "project", "customer", "model", "provider", "status", "cache"}
	usageParams  = append(slices.Clone(filterParams), "group_by", "interval")
	logParams    = append(slices.Clone(filterParams), "limit", "cursor")
)

// usageRow is one element of GET /admin/usage's data: the group field is
// named after group_by (key, project, …), bucket appears with interval.
type usageRow map[string]any

// usageAnswer is the body of GET /admin/usage.
type usageAnswer struct {
	Data []usageRow `json:"data"`
	From time.Time  `json:"from"`
	To   time.Time  `json:"to"`
}

// logsAnswer is the body of GET /admin/logs.
type logsAnswer struct {
	Object     string           `json:"object"` // "list"
	Data       []account.Record `json:"data"`
	NextCursor *string          `json:"next_cursor"` // null on the last page
}

func (h *Handler) usageStore() (account.Querier, error) {
	if h.o.Usage == nil {
		return nil, &llm.Error{Kind: llm.KindNotImplemented, Status: http.StatusNotImplemented, Type: "invalid_request_error",
			Code: "not_implemented", Message: "This gateway's record store keeps no usage records."}
	}
	return h.o.Usage, nil
}

// filter reads the filter parameters; allowed lists every parameter the
// endpoint takes. Without from, the window is the defaultWindow before to
// (or now); the window is returned resolved.
func (h *Handler) filter(r *http.Request, allowed []string, window bool) (account.Filter, error) {
	q := r.URL.Query()
	for name := range q {
		if !slices.Contains(allowed, name) {
			return account.Filter{}, llm.BadRequest(name, "unknown_parameter", "%s: unknown query parameter (this endpoint takes %s).",
				name, strings.Join(allowed, ", "))
		}
	}
	var f account.Filter
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if s := q.Get(p.name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return f, llm.BadRequest(p.name, "invalid_time", "%s: want an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q.", p.name, s)
			}
			*p.dst = t.UTC()
		}
	}
	if window {
		if f.To.IsZero() {
			f.To = h.o.Now().UTC()
		}
		if f.From.IsZero() {
			f.From = f.To.Add(-defaultWindow)
		}
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, llm.BadRequest("from", "invalid_window", "from must be before to.")
	}
	f.Key, f.Project, f.Customer, f.Model, f.Provider = q.Get("key"), q.Get("project"), q.Get("customer"), q.Get("model"), q.Get("provider")
	if s := q.Get("status"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return f, llm.BadRequest("status", "invalid_status", "status: want an HTTP status code, not %q.", s)
		}
		f.Status = n
	}
	if s := q.Get("cache"); s != "" {
		switch s {
		case account.CacheHit, account.CacheSemantic, account.CacheMiss, account.CacheBypass:
		default:
			return f, llm.BadRequest("cache", "invalid_cache", "cache: one of hit, semantic, miss or bypass, not %q.", s)
		}
		f.Cache = s
	}
	return f, nil
}

// getUsage serves GET /admin/usage.
func (h *Handler) getUsage(r *http.Request) (int, any, error) {
	st, err := h.usageStore()
	if err != nil {
		return 0, nil, err
	}
	f, err := h.filter(r, usageParams, true)
	if err != nil {
		return 0, nil, err
	}
	q := account.UsageQuery{Filter: f}
	var ok bool
	if q.GroupBy, ok = account.ParseGroupBy(r.URL.Query().Get("group_by")); !ok {
		return 0, nil, llm.BadRequest("group_by", "invalid_group_by", "group_by: one of key, project, customer, model or provider.")
	}
	if q.Interval, ok = account.ParseInterval(r.URL.Query().Get("interval")); !ok {
		return 0, nil, llm.BadRequest("interval", "invalid_interval", "interval: minute, hour or day.")
	}
	// Minute buckets are read from the records, one per minute and group:
	// a month of them is a mistake, not a chart.
	if w := f.To.Sub(f.From); q.Interval == account.IntervalMinute && w > account.MaxMinuteWindow {
		return 0, nil, llm.BadRequest("interval", "window_too_long",
			"interval=minute takes a window of at most %g hours; from to to is %g hours. Narrow it, or use interval=hour.",
			account.MaxMinuteWindow.Hours(), w.Hours())
	}
	rows, err := st.Usage(r.Context(), q)
	if err != nil {
		return 0, nil, err
	}
	out := usageAnswer{Data: make([]usageRow, 0, len(rows)), From: f.From, To: f.To}
	for _, row := range rows {
		u := usageRow{"requests": row.Requests, "errors": row.Errors, "prompt_tokens": row.PromptTokens,
			"completion_tokens": row.CompletionTokens, "cached_tokens": row.CachedTokens, "cost_usd": row.Cost.String(),
			"cache_hits": row.CacheHits, "latency_ms_p50": percentile(row.Latency, 0.5),
			"latency_ms_p95": percentile(row.Latency, 0.95), "ttft_ms_p50": percentile(row.TTFT, 0.5),
			"ttft_ms_p95": percentile(row.TTFT, 0.95)}
		if q.GroupBy != account.GroupNone {
			u[string(q.GroupBy)] = row.Group
		}
		if q.Interval != account.IntervalNone {
			u["bucket"] = row.Bucket.Format(time.RFC3339)
		}
		out.Data = append(out.Data, u)
	}
	return http.StatusOK, out, nil
}

// percentile is h's q-quantile in milliseconds, to the hundredth (an
// estimate within its bucket's width needs no more digits), or nil (JSON
// null) when h has no sample.
func percentile(h account.Histogram, q float64) any {
	ms, ok := h.Quantile(q)
	if !ok {
		return nil
	}
	return math.Round(ms*100) / 100
}

// logPage reads limit and cursor.
func logPage(r *http.Request, f account.Filter) (account.LogQuery, error) {
	q := account.LogQuery{Filter: f, Limit: defaultLimit, Cursor: r.URL.Query().Get("cursor")}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return q, llm.BadRequest("limit", "invalid_limit", "limit: must be an integer from 1 to %d, not %q.", maxLimit, s)
		}
		q.Limit = n
	}
	return q, nil
}

func cursorError(err error) error {
	if errors.Is(err, account.ErrBadCursor) {
		return llm.BadRequest("cursor", "invalid_cursor", "cursor: pass the next_cursor of the previous page unchanged.")
	}
	return err
}

// getLogs serves GET /admin/logs.
func (h *Handler) getLogs(r *http.Request) (int, any, error) {
	st, err := h.usageStore()
	if err != nil {
		return 0, nil, err
	}
	f, err := h.filter(r, logParams, false)
	if err != nil {
		return 0, nil, err
	}
	q, err := logPage(r, f)
	if err != nil {
		return 0, nil, err
	}
	page, err := st.Logs(r.Context(), q)
	if err != nil {
		return 0, nil, cursorError(err)
	}
	out := logsAnswer{Object: "list", Data: page.Records}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	return http.StatusOK, out, nil
}

// getLog serves GET /admin/logs/{request_id}.
func (h *Handler) getLog(r *http.Request) (int, any, error) {
	st, err := h.usageStore()
	if err != nil {
		return 0, nil, err
	}
	id := r.PathValue("request_id")
	rec, err := st.Record(r.Context(), id)
	if errors.Is(err, account.ErrNotFound) {
		return 0, nil, notFoundError("request", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, rec, nil
}

// csvColumns are the export's columns: the record's JSON fields, bodies
// left out (they may be large and hold what the operator redacted).
var csvColumns = []string{"request_id", "time", "endpoint", "key_id", "project_id", "project", "customer", "model",
	"served_model", "provider", "deployment", "status", "error_kind", "prompt_tokens", "completion_tokens",
	"cached_tokens", "reasoning_tokens", "cost_usd", "usage_source", "latency_ms", "ttft_ms", "overhead_ms", "cache",
	"attempts", "stream", "labels"}

func csvRow(r *account.Record) []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	labels := ""
	if len(r.Labels) > 0 {
		keys := make([]string, 0, len(r.Labels))
		for k := range r.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				labels += ";"
			}
			labels += k + "=" + r.Labels[k]
		}
	}
	return []string{r.RequestID, r.Time.UTC().Format(time.RFC3339Nano), r.Endpoint, r.KeyID, r.ProjectID, r.Project,
		r.Customer, r.Model, r.ServedModel, r.Provider, r.Deployment, strconv.Itoa(r.Status), r.ErrorKind,
		strconv.Itoa(r.PromptTokens), strconv.Itoa(r.CompletionTokens), strconv.Itoa(r.CachedTokens),
		strconv.Itoa(r.ReasoningTokens), r.Cost.String(), r.UsageSource, f(r.LatencyMS), f(r.TTFTMS), f(r.OverheadMS),
		r.Cache, strconv.Itoa(r.Attempts), strconv.FormatBool(r.Stream), labels}
}

// exportUsage serves GET /admin/usage/export: every record of the
// window (the usage API's default window and filters), newest first, as
// CSV, streamed a page at a time so an export of millions of records
// holds one page in memory.
func (h *Handler) exportUsage(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) { h.toError(r, err).WriteOpenAI(w) }
	st, err := h.usageStore()
	if err != nil {
		fail(err)
		return
	}
	f, err := h.filter(r, filterParams, true)
	if err != nil {
		fail(err)
		return
	}
	q := account.LogQuery{Filter: f, Limit: maxLimit}
	page, err := st.Logs(r.Context(), q)
	if err != nil {
		fail(err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="gatehouse-usage-`+f.From.Format("20060102T150405Z")+`-`+f.To.Format("20060102T150405Z")+`.csv"`)
	cw := csv.NewWriter(w)
	_ = cw.Write(csvColumns)
	for {
		for i := range page.Records {
			_ = cw.Write(csvRow(&page.Records[i]))
		}
		cw.Flush()
		if page.Next == "" || cw.Error() != nil {
			return
		}
		q.Cursor = page.Next
		if page, err = st.Logs(r.Context(), q); err != nil {
			// The status is out: end the CSV with a line that says so.
			h.o.Log.Error("admin: usage export cut short", "error", err.Error())
			_, _ = w.Write([]byte("# export incomplete: the record store failed; see the gateway log\n"))
			return
		}
	}
}
