package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// TestCLIUsageAndLogs runs gatehouse usage and gatehouse logs, tables and
// --json, against a gateway that served three requests.
func TestCLIUsageAndLogs(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, baseConfig(up, "admin_key: "+testAdminKey+"\n"))
	for range 3 {
		if st := chatStatus(t, gw.URL, clientKey); st != 200 {
			t.Fatalf("chat: %d", st)
		}
	}
	waitFor(t, 30*time.Second, "three records", func() bool {
		out, _, err := cliRun(t, gw.URL, "logs", "--json")
		var page struct{ Data []any }
		return err == nil && json.Unmarshal([]byte(out), &page) == nil && len(page.Data) == 3
	})

	out, stderr, err := cliRun(t, gw.URL, "usage", "--group-by", "model", "--from", "1h")
	if err != nil {
		t.Fatalf("usage: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "MODEL") || !strings.HasPrefix(lines[2], "chat ") || !strings.Contains(lines[2], " 3 ") {
		t.Fatalf("usage table:\n%s", out)
	}
	// The latency percentiles are columns of the table: three requests
	// answered, so p50 is a number; none streamed, so no ttft.
	// MODEL REQUESTS ERRORS PROMPT COMPLETION CACHED COST CACHE-HITS P50 P95 TTFT-P50 TTFT-P95
	row := strings.Fields(lines[2])
	if !strings.Contains(lines[1], "P50 MS  P95 MS  TTFT P50  TTFT P95") || len(row) != 12 {
		t.Fatalf("usage table without latency percentiles:\n%s", out)
	}
	if p50, err := strconv.ParseFloat(row[8], 64); err != nil || p50 <= 0 || row[10] != "-" || row[11] != "-" {
		t.Fatalf("usage table: p50 %q, ttft %q %q; want a latency and no ttft:\n%s", row[8], row[10], row[11], out)
	}
	out, stderr, err = cliRun(t, gw.URL, "usage", "--interval", "minute", "--cache", "bypass")
	if err != nil || !strings.Contains(out, "BUCKET") {
		t.Fatalf("usage --interval minute --cache bypass: %v\n%s%s", err, out, stderr)
	}
	out, _, err = cliRun(t, gw.URL, "usage", "--json", "--interval", "hour")
	var usage struct {
		Data []struct {
			Requests int    `json:"requests"`
			Bucket   string `json:"bucket"`
		} `json:"data"`
	}
	if err != nil || json.Unmarshal([]byte(out), &usage) != nil || len(usage.Data) == 0 || usage.Data[0].Bucket == "" {
		t.Fatalf("usage --json --interval hour: %v\n%s", err, out)
	}

	out, stderr, err = cliRun(t, gw.URL, "logs", "--limit", "2", "--key", "static:tester")
	if err != nil {
		t.Fatalf("logs: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(out, "TIME ") || strings.Count(out, "static:tester") != 2 || !strings.Contains(out, "more: gatehouse logs --cursor ") {
		t.Fatalf("logs table:\n%s", out)
	}
	cursor := strings.Fields(out[strings.Index(out, "--cursor "):])[1]
	out, _, err = cliRun(t, gw.URL, "logs", "--limit", "2", "--cursor", cursor, "--json")
	var page struct {
		Data []struct {
			RequestID string `json:"request_id"`
		} `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Data) != 1 || page.NextCursor != nil {
		t.Fatalf("second page: %v\n%s", err, out)
	}
	out, stderr, err = cliRun(t, gw.URL, "logs", "get", page.Data[0].RequestID)
	if err != nil || !strings.Contains(out, "request_id") || !strings.Contains(out, page.Data[0].RequestID) || !strings.Contains(out, "cost_usd") {
		t.Fatalf("logs get: %v\n%s%s", err, out, stderr)
	}
	if _, stderr, err := cliRun(t, gw.URL, "logs", "get", "gh-none"); err == nil || !strings.Contains(stderr, "404") {
		t.Fatalf("logs get of a missing id: %v %s", err, stderr)
	}
	if _, stderr, err := cliRun(t, gw.URL, "usage", "--from", "yesterday"); err == nil || !strings.Contains(stderr, "--from") {
		t.Fatalf("usage --from yesterday: %v %s", err, stderr)
	}
}

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"24h": now.Add(-24 * time.Hour), "7d": now.Add(-7 * 24 * time.Hour), "1d12h": now.Add(-36 * time.Hour),
		"2026-11-01T00:00:00Z": time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
	} {
		got, err := parseWhen(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"yesterday", "-1h", "d", "3x"} {
		if _, err := parseWhen(bad, now); err == nil {
			t.Errorf("parseWhen(%q) accepted", bad)
		}
	}
}
