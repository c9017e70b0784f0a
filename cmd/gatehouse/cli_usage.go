package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// usageCmd and logsCmd read the usage records through the admin API:
// GET /admin/usage, /admin/logs and /admin/logs/{request_id}.

// recordFilter are the filter flags the usage and log commands share,
// named as the API's query parameters.
type recordFilter struct {
	From     string `help:"Start of the window: RFC 3339, or how long before now (24h, 7d)."`
	To       string `help:"End of the window: RFC 3339, or how long before now; default now."`
	Key      string `help:"Only this key (its ID)."`
	Project  string `help:"Only this project (ID or name)."`
	Customer string `help:"Only this customer."`
	Model    string `help:"Only this model, as clients send it."`
	Provider string `help:"Only this provider (its configured name)."`
	Status   int    `help:"Only this HTTP status."`
	Cache    string `enum:",hit,semantic,miss,bypass" default:"" help:"Only requests with this cache outcome: hit, semantic, miss or bypass."`
}

// query turns the flags into query parameters, resolving relative times
// against now.
func (f *recordFilter) query(now time.Time) (url.Values, error) {
	q := url.Values{}
	for name, v := range map[string]string{"from": f.From, "to": f.To} {
		if v == "" {
			continue
		}
		t, err := parseWhen(v, now)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", name, err)
		}
		q.Set(name, t.Format(time.RFC3339))
	}
	for name, v := range map[string]string{"key": f.Key, "project": f.Project, "customer": f.Customer, "model": f.Model, "provider": f.Provider,
		"cache": f.Cache} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if f.Status != 0 {
		q.Set("status", strconv.Itoa(f.Status))
	}
	return q, nil
}

// parseWhen reads an RFC 3339 time, or a duration before now ("24h",
// "7d", "1d12h").
func parseWhen(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	days := 0
	rest := s
	if d, r, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 {
			return time.Time{}, fmt.Errorf("want an RFC 3339 time or a duration such as 24h or 7d, not %q", s)
		}
		days, rest = n, r
	}
	var d time.Duration
	if rest != "" {
		var err error
		if d, err = time.ParseDuration(rest); err != nil || d < 0 {
			return time.Time{}, fmt.Errorf("want an RFC 3339 time or a duration such as 24h or 7d, not %q", s)
		}
	}
	return now.Add(-(time.Duration(days)*24*time.Hour + d)).UTC().Truncate(time.Second), nil
}

type usageCmd struct {
	adminFlags   `embed:""`
	recordFilter `embed:""`
	GroupBy      string `name:"group-by" enum:",key,project,customer,model,provider" default:"" help:"Group by key, project, customer, model or provider."`
	Interval     string `enum:",minute,hour,day" default:"" help:"Bucket by UTC minute (windows up to 24h), hour or day."`
}

func (c *usageCmd) Run() error { return c.run(context.Background(), os.Stdout, time.Now()) }

func (c *usageCmd) run(ctx context.Context, w io.Writer, now time.Time) error {
	q, err := c.query(now)
	if err != nil {
		return err
	}
	if c.GroupBy != "" {
		q.Set("group_by", c.GroupBy)
	}
	if c.Interval != "" {
		q.Set("interval", c.Interval)
	}
	raw, err := c.call(ctx, http.MethodGet, "/admin/usage?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(w, raw)
	}
	var ans struct {
		Data     []map[string]any `json:"data"`
		From, To string
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		return fmt.Errorf("unexpected answer from /admin/usage: %w", err)
	}
	var cols []column
	if c.GroupBy != "" {
		cols = append(cols, column{strings.ToUpper(c.GroupBy), str(c.GroupBy)})
	}
	if c.Interval != "" {
		cols = append(cols, column{"BUCKET", func(r map[string]any) string { return fmt.Sprint(r["bucket"]) }})
	}
	cols = append(cols, column{"REQUESTS", str("requests")}, column{"ERRORS", str("errors")},
		column{"PROMPT", str("prompt_tokens")}, column{"COMPLETION", str("completion_tokens")},
		column{"CACHED", str("cached_tokens")}, column{"COST USD", str("cost_usd")}, column{"CACHE HITS", str("cache_hits")},
		column{"P50 MS", millis("latency_ms_p50")}, column{"P95 MS", millis("latency_ms_p95")},
		column{"TTFT P50", millis("ttft_ms_p50")}, column{"TTFT P95", millis("ttft_ms_p95")})
	fmt.Fprintf(w, "%s – %s\n", cellTime(ans.From), cellTime(ans.To))
	if len(ans.Data) == 0 {
		fmt.Fprintln(w, "no requests")
		return nil
	}
	return printTable(w, cols, ans.Data)
}

// millis shows a duration in milliseconds to a tenth; "-" without one (no
// sample in the row).
func millis(name string) func(map[string]any) string {
	return func(r map[string]any) string {
		v, ok := r[name].(float64)
		if !ok {
			return "-"
		}
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
}

// cellTime shows an RFC 3339 time to the second, in UTC.
func cellTime(v any) string {
	s, _ := v.(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return cell(v)
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// logsCmd: gatehouse logs [flags] lists records; gatehouse logs get ID
// shows one.
type logsCmd struct {
	List logsListCmd `cmd:"" default:"withargs" help:"List usage records, newest first (the default)."`
	Get  logsGetCmd  `cmd:"" help:"Show one request's usage record by its request id."`
}

type logsListCmd struct {
	adminFlags   `embed:""`
	recordFilter `embed:""`
	Limit        int    `default:"50" help:"Records to show (1 to 500)."`
	Cursor       string `help:"Continue from an earlier listing's next cursor."`
}

var logColumns = []column{
	{"TIME", func(r map[string]any) string { return cellTime(r["time"]) }},
	{"REQUEST ID", str("request_id")}, {"KEY", str("key_id")}, {"PROJECT", str("project")}, {"MODEL", str("model")},
	{"PROVIDER", str("provider")}, {"STATUS", str("status")},
	{"TOKENS", func(r map[string]any) string { return cell(r["prompt_tokens"]) + "/" + cell(r["completion_tokens"]) }},
	{"COST USD", str("cost_usd")}, {"LATENCY MS", str("latency_ms")}, {"USAGE", str("usage_source")}, {"CACHE", str("cache")},
}

func (c *logsListCmd) Run() error { return c.run(context.Background(), os.Stdout, time.Now()) }

func (c *logsListCmd) run(ctx context.Context, w io.Writer, now time.Time) error {
	q, err := c.query(now)
	if err != nil {
		return err
	}
	q.Set("limit", strconv.Itoa(c.Limit))
	if c.Cursor != "" {
		q.Set("cursor", c.Cursor)
	}
	raw, err := c.call(ctx, http.MethodGet, "/admin/logs?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(w, raw)
	}
	var page struct {
		Data       []map[string]any `json:"data"`
		NextCursor *string          `json:"next_cursor"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return fmt.Errorf("unexpected answer from /admin/logs: %w", err)
	}
	if err := printTable(w, logColumns, page.Data); err != nil {
		return err
	}
	if page.NextCursor != nil {
		fmt.Fprintf(w, "more: gatehouse logs --cursor %s (with the same filters)\n", *page.NextCursor)
	}
	return nil
}

type logsGetCmd struct {
	adminFlags `embed:""`
	RequestID  string `arg:"" name:"request-id" help:"The x-gatehouse-request-id of the request."`
}

var recordFields = []string{"request_id", "time", "endpoint", "key_id", "project_id", "project", "customer", "model",
	"served_model", "provider", "deployment", "status", "error_kind", "prompt_tokens", "completion_tokens",
	"cached_tokens", "reasoning_tokens", "cost_usd", "usage_source", "latency_ms", "ttft_ms", "overhead_ms", "cache",
	"attempts", "stream", "labels", "request_body", "response_body"}

func (c *logsGetCmd) Run() error { return c.run(context.Background(), os.Stdout) }

func (c *logsGetCmd) run(ctx context.Context, w io.Writer) error {
	raw, err := c.call(ctx, http.MethodGet, "/admin/logs/"+url.PathEscape(c.RequestID), nil)
	if err != nil {
		return err
	}
	return c.show(w, raw, recordFields)
}
