package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// goroutineSlack is how many goroutines more than the baseline still
// count as back at rest: timers and background loops (health of the sink,
// the config watcher) come and go.
const goroutineSlack = 10

// sample is the gateway's state at one moment, from its Prometheus
// endpoint (the Go and process collectors) and /proc.
type sample struct {
	at         time.Time
	goroutines int
	openFDs    int
	heapInuse  int64 // bytes
	rss        int64 // bytes
	gcCycles   int64
}

// gaugeReader reads samples of one gateway process.
type gaugeReader struct {
	url string // its /metrics
	pid int
}

func (g gaugeReader) zero() sample { return sample{} }

// read takes one sample.
func (g gaugeReader) read() (sample, error) {
	resp, err := http.Get(g.url)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("GET %s: %s", g.url, resp.Status)
	}
	s, err := parseMetrics(resp.Body)
	if err != nil {
		return s, err
	}
	s.at = time.Now()
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", g.pid)); err == nil {
		s.openFDs = len(fds) // the process collector's figure, read directly: it is what leaks show in
	}
	return s, nil
}

// every takes a sample each interval until ctx ends.
func (g gaugeReader) every(ctx context.Context, interval time.Duration) []sample {
	var out []sample
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if s, err := g.read(); err == nil {
			out = append(out, s)
		}
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

// parseMetrics picks the gauges a sample holds out of a Prometheus text
// exposition; a missing one is an error, since a check would pass on it.
func parseMetrics(r io.Reader) (sample, error) {
	var s sample
	found := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		var dst *int64
		var n int64
		switch name {
		case "go_goroutines", "process_open_fds":
			dst = &n
		case "go_memstats_heap_inuse_bytes":
			dst = &s.heapInuse
		case "process_resident_memory_bytes":
			dst = &s.rss
		case "go_gc_duration_seconds_count":
			dst = &s.gcCycles
		default:
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return s, fmt.Errorf("metric %s: %w", name, err)
		}
		*dst = int64(f)
		switch name {
		case "go_goroutines":
			s.goroutines = int(n)
		case "process_open_fds":
			s.openFDs = int(n)
		}
		found[name] = true
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_inuse_bytes", "go_gc_duration_seconds_count"} {
		if !found[name] {
			return s, fmt.Errorf("the gateway's metrics lack %s", name)
		}
	}
	return s, nil
}
