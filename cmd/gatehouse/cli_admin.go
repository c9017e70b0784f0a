package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The keys, projects and customers commands talk to a running gateway's
// admin API (docs/openapi.yaml); they never open the store themselves, so
// they work the same against one laptop process or a cluster.

// adminFlags are the connection flags every admin command takes.
type adminFlags struct {
	Addr     string `env:"GATEHOUSE_ADDR" default:"http://127.0.0.1:8080" help:"Address of the running gateway."`
	AdminKey string `env:"GATEHOUSE_ADMIN_KEY" help:"The gateway's admin key (admin_key in its config)."`
	JSON     bool   `name:"json" help:"Print JSON for scripts instead of a table."`
}

// apiError is an error answer of the admin API.
type apiError struct {
	Status  int
	Message string
	Code    string
	Param   string
}

func (e *apiError) Error() string {
	s := fmt.Sprintf("admin API answered %d", e.Status)
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s + ": " + e.Message
}

// call sends one admin request and returns the body of a 2xx answer.
func (f *adminFlags) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	if f.AdminKey == "" {
		return nil, errors.New("no admin key: pass --admin-key or set GATEHOUSE_ADMIN_KEY")
	}
	base := strings.TrimRight(f.Addr, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", f.Addr, err)
	}
	req.Header.Set("Authorization", "Bearer "+f.AdminKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the gateway at %s: %w", base, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode, Message: strings.TrimSpace(string(out))}
		var eb struct {
			Error struct {
				Message, Code, Param string
			} `json:"error"`
		}
		if json.Unmarshal(out, &eb) == nil && eb.Error.Message != "" {
			e.Message, e.Code, e.Param = eb.Error.Message, eb.Error.Code, eb.Error.Param
		}
		return nil, e
	}
	return out, nil
}

// listAll follows a list endpoint's pages to the end.
func (f *adminFlags) listAll(ctx context.Context, path string, q url.Values) ([]map[string]any, error) {
	var all []map[string]any
	q.Set("limit", "500")
	for {
		b, err := f.call(ctx, http.MethodGet, path+"?"+q.Encode(), nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Data      []map[string]any `json:"data"`
			HasMore   bool             `json:"has_more"`
			NextAfter string           `json:"next_after"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return nil, fmt.Errorf("unexpected answer from %s: %w", path, err)
		}
		all = append(all, page.Data...)
		if !page.HasMore || page.NextAfter == "" {
			return all, nil
		}
		q.Set("after", page.NextAfter)
	}
}

// printJSON writes v indented; raw JSON bodies are re-indented.
func printJSON(w io.Writer, v any) error {
	if raw, ok := v.([]byte); ok {
		var buf bytes.Buffer
		if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := w.Write(buf.Bytes())
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// column is one column of a table: its header and how to show a record.
type column struct {
	head string
	get  func(r map[string]any) string
}

func str(name string) func(map[string]any) string {
	return func(r map[string]any) string { return cell(r[name]) }
}

// rate shows a limit, 0 (or absent) for unlimited.
func rate(v any) string {
	if v == nil {
		return "0"
	}
	return cell(v)
}

// cell shows a JSON value compactly; absent is "-".
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		if v == "" {
			return "-"
		}
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil && strings.Contains(v, "T") {
			return t.UTC().Format("2006-01-02 15:04")
		}
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = cell(x)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		if usd, ok := v["usd"]; ok {
			return "$" + cell(usd) + "/" + cell(v["period"])
		}
		parts := make([]string, 0, len(v))
		for k, x := range v {
			if sub, ok := x.(map[string]any); ok {
				if _, rates := sub["rpm"]; rates { // model_limits: MODEL=RPM/TPM, as the flag takes them
					parts = append(parts, k+"="+rate(sub["rpm"])+"/"+rate(sub["tpm"]))
					continue
				}
				for sk, sv := range sub { // cache: exact.enabled=true,exact.ttl_seconds=120
					parts = append(parts, k+"."+sk+"="+cell(sv))
				}
				continue
			}
			parts = append(parts, k+"="+cell(x))
		}
		sort.Strings(parts)
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

func printTable(w io.Writer, cols []column, rows []map[string]any) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c.head)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		for i, c := range cols {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c.get(r))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// printRecord shows one record as aligned "field  value" lines.
func printRecord(w io.Writer, raw []byte, order []string) error {
	var r map[string]any
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, name := range order {
		if v, ok := r[name]; ok {
			fmt.Fprintf(tw, "%s\t%s\n", name, cell(v))
		}
	}
	return tw.Flush()
}

// show prints an answer: JSON for scripts, else the record's fields.
func (f *adminFlags) show(w io.Writer, raw []byte, order []string) error {
	if f.JSON {
		return printJSON(w, raw)
	}
	return printRecord(w, raw, order)
}

// showList prints every record of a list.
func (f *adminFlags) showList(w io.Writer, rows []map[string]any, cols []column) error {
	if f.JSON {
		if rows == nil {
			rows = []map[string]any{}
		}
		return printJSON(w, rows)
	}
	return printTable(w, cols, rows)
}

// Flag parsing shared by the commands.

// parseBudget reads "10/month": US dollars over day, week, month or total.
// "none" clears a budget.
func parseBudget(s string) (any, error) {
	if s == "none" {
		return nil, nil
	}
	amount, period, ok := strings.Cut(s, "/")
	usd, err := strconv.ParseFloat(strings.TrimPrefix(amount, "$"), 64)
	if !ok || err != nil {
		return nil, fmt.Errorf("--budget %q: want USD/PERIOD, e.g. 10/month (period day, week, month or total), or none", s)
	}
	return map[string]any{"usd": usd, "period": period}, nil
}

// parseExpiry reads a lifetime ("30d", "12h", "90m", "1.5s") or an RFC
// 3339 time, and writes the instant with its fraction of a second: the
// API keeps it, and a key meant to end at .5 must not live half a second
// longer or shorter.
func parseExpiry(s string, now time.Time) (string, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC().Format(time.RFC3339Nano), nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err == nil && n > 0 {
			return now.Add(time.Duration(n) * 24 * time.Hour).UTC().Format(time.RFC3339Nano), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d).UTC().Format(time.RFC3339Nano), nil
	}
	return "", fmt.Errorf("--expires %q: want a lifetime such as 30d or 12h, or an RFC 3339 time", s)
}

func parseLabels(pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want NAME=VALUE", p)
		}
		m[k] = v
	}
	return m, nil
}

// settings collects the optional members of a request body: only flags
// that were given are sent, so an update changes only what was named.
type settings map[string]any

func (s settings) int(name string, v *int) {
	if v != nil {
		s[name] = *v
	}
}

func (s settings) float(name string, v *float64) {
	if v != nil {
		s[name] = *v
	}
}

func (s settings) str(name string, v *string) {
	if v != nil {
		s[name] = *v
	}
}

func (s settings) list(name string, v []string, given bool) {
	if given {
		if len(v) == 0 || (len(v) == 1 && v[0] == "") {
			s[name] = nil
		} else {
			s[name] = v
		}
	}
}

func (s settings) budget(v *string) error {
	if v == nil {
		return nil
	}
	b, err := parseBudget(*v)
	if err != nil {
		return err
	}
	s["budget"] = b
	return nil
}

func (s settings) labels(pairs []string) error {
	m, err := parseLabels(pairs)
	if err != nil {
		return err
	}
	if m != nil {
		s["labels"] = m
	}
	return nil
}

func pathID(kind, id string) string { return "/admin/" + kind + "/" + url.PathEscape(id) }
