package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// recordCheck is what the usage records say about the requests sent.
type recordCheck struct {
	sent      int     // requests that reached the gateway
	records   int     // records labelled by this run
	missing   []int64 // sent, no record
	duplicate []int64 // more than one record
	unknown   int     // records whose label names no request sent
}

func (c recordCheck) ok() bool {
	return len(c.missing) == 0 && len(c.duplicate) == 0 && c.unknown == 0 && c.sent > 0
}

// recordWait bounds the wait for the last records: the sink writes in
// batches, a few per second.
const recordWait = 60 * time.Second

// checkRecords reads the run's usage records (the admin API's CSV export)
// until every request sent has one, or until their number stops growing
// for recordWait, and matches them to the requests by their soak label.
func checkRecords(ctx context.Context, base, admin string, since time.Time, sent []int64, maybe map[int64]bool) (recordCheck, error) {
	var c recordCheck
	last, lastChange := -1, time.Now()
	for {
		counts, err := exportLabels(ctx, base, admin, since)
		if err != nil {
			return c, err
		}
		c = matchRecords(counts, sent, maybe)
		if len(c.missing) == 0 || time.Since(lastChange) > recordWait {
			return c, nil
		}
		if c.records != last {
			last, lastChange = c.records, time.Now()
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// matchRecords compares the records per label value with what was sent;
// a request in maybe may have no record but not two.
func matchRecords(counts map[int64]int, sent []int64, maybe map[int64]bool) recordCheck {
	c := recordCheck{sent: len(sent)}
	want := make(map[int64]bool, len(sent))
	for _, n := range sent {
		want[n] = true
		switch counts[n] {
		case 0:
			c.missing = append(c.missing, n)
		case 1:
		default:
			c.duplicate = append(c.duplicate, n)
		}
	}
	for n, k := range counts {
		c.records += k
		switch {
		case want[n]:
		case maybe[n] && k == 1:
		case maybe[n]:
			c.duplicate = append(c.duplicate, n)
		default:
			c.unknown += k
		}
	}
	return c
}

// exportLabels fetches the records since the run began and counts them
// by their soak label.
func exportLabels(ctx context.Context, base, admin string, since time.Time) (map[int64]int, error) {
	u := base + "/admin/usage/export?from=" + url.QueryEscape(since.Add(-time.Minute).Format(time.RFC3339)) +
		"&to=" + url.QueryEscape(time.Now().Add(time.Minute).UTC().Format(time.RFC3339))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("GET /admin/usage/export: %s: %s", resp.Status, b)
	}
	return countLabels(resp.Body)
}

// countLabels reads the export's CSV and counts the records per value of
// the soak label (labels are written name=value;name=value).
func countLabels(r io.Reader) (map[int64]int, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("the export's header: %w", err)
	}
	col := -1
	for i, h := range header {
		if h == "labels" {
			col = i
		}
	}
	if col < 0 {
		return nil, errors.New("the export has no labels column")
	}
	counts := map[int64]int{}
	for {
		row, err := cr.Read()
		if err == io.EOF {
			return counts, nil
		}
		if err != nil {
			return nil, err
		}
		for l := range strings.SplitSeq(row[col], ";") {
			if v, ok := strings.CutPrefix(l, "soak="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("a record's soak label %q", v)
				}
				counts[n]++
			}
		}
	}
}
