package route

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Background probes: what a config generation runs beside the request
// path to learn about its deployments. Each has a Run loop the generation
// starts and stops; nothing here is ever called by a request.

// Metric names of model servers' load, by server kind (config
// providers[].load.kind).
func LoadMetrics(kind string) (running, waiting, kvCache []string, ok bool) {
	switch kind {
	case "llama.cpp", "llamacpp":
		return []string{"llamacpp:requests_processing"}, []string{"llamacpp:requests_deferred"},
			[]string{"llamacpp:kv_cache_usage_ratio"}, true
	case "vllm":
		return []string{"vllm:num_requests_running"}, []string{"vllm:num_requests_waiting"},
			[]string{"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"}, true
	}
	return nil, nil, nil, false
}

// MetricsPoller reads a model server's Prometheus /metrics in the
// background and serves the latest reading as a LoadSignal. Samples of a
// name are summed across label sets (vLLM labels them by model), except
// KV-cache use, where the highest counts.
type MetricsPoller struct {
	URL      string
	Client   *http.Client  // nil: http.DefaultClient
	Interval time.Duration // 0: 2s
	Running  []string
	Waiting  []string
	KVCache  []string
	// OnError, when set, hears about failed polls (for a log line).
	OnError func(error)

	last atomic.Pointer[reading]
	now  func() time.Time // the clock readings are dated and aged by; nil: time.Now (tests set their own)
	// timeout bounds one poll; 0: the interval, so a server slower than
	// the polling rate gives no reading. Tests polling every millisecond
	// set a longer one, which a loaded machine's loopback needs.
	timeout time.Duration
}

func (p *MetricsPoller) clock() time.Time {
	if p.now == nil {
		return time.Now()
	}
	return p.now()
}

type reading struct {
	load Load
	at   time.Time
}

func (p *MetricsPoller) interval() time.Duration {
	if p.Interval <= 0 {
		return 2 * time.Second
	}
	return p.Interval
}

// Load returns the last reading if it is at most three intervals old: a
// server that stopped answering its metrics has no load signal rather
// than a frozen one.
func (p *MetricsPoller) Load() (Load, bool) {
	r := p.last.Load()
	if r == nil || p.clock().Sub(r.at) > 3*p.interval() {
		return Load{}, false
	}
	return r.load, true
}

// Run polls until ctx ends.
func (p *MetricsPoller) Run(ctx context.Context) {
	t := time.NewTicker(p.interval())
	defer t.Stop()
	for {
		if err := p.Poll(ctx); err != nil && ctx.Err() == nil && p.OnError != nil {
			p.OnError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll reads the metrics once.
func (p *MetricsPoller) Poll(ctx context.Context) error {
	timeout := p.timeout
	if timeout <= 0 {
		timeout = p.interval()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return err
	}
	c := p.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("load metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("load metrics: %s answered %d", p.URL, resp.StatusCode)
	}
	l, err := ParseLoad(io.LimitReader(resp.Body, 4<<20), p.Running, p.Waiting, p.KVCache)
	if err != nil {
		return err
	}
	p.last.Store(&reading{load: l, at: p.clock()})
	return nil
}

// ParseLoad reads the Prometheus text exposition format and sums the
// named samples into a Load.
func ParseLoad(r io.Reader, running, waiting, kvCache []string) (Load, error) {
	var l Load
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if !slices.Contains(running, name) && !slices.Contains(waiting, name) && !slices.Contains(kvCache, name) {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		switch {
		case slices.Contains(running, name):
			l.Running += v
		case slices.Contains(waiting, name):
			l.Waiting += v
		default:
			if v > 1 { // some servers report a percentage
				v /= 100
			}
			l.KVCache = max(l.KVCache, v)
		}
	}
	return l, sc.Err()
}

// HealthCheck asks a provider's health endpoint every Interval and takes
// its deployments out of selection while it fails (after two failures in
// a row, so one lost packet does not), until a check passes again.
type HealthCheck struct {
	Pool     *Pool
	Provider string // the provider's configured name
	URL      string
	Client   *http.Client  // nil: http.DefaultClient
	Interval time.Duration // 0: 10s
	Timeout  time.Duration // 0: 2s
	// OnChange, when set, hears when the provider goes down or comes back.
	OnChange func(down bool, err error)

	fails    int
	reported bool // the pool has heard a result, so it shows the provider as checked
}

// Run checks until ctx ends.
func (h *HealthCheck) Run(ctx context.Context) {
	every := h.Interval
	if every <= 0 {
		every = 10 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		h.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Check runs one check and applies it.
func (h *HealthCheck) Check(ctx context.Context) {
	err := h.probe(ctx)
	if ctx.Err() != nil {
		return
	}
	wasDown := h.fails >= 2
	if err != nil {
		h.fails++
	} else {
		h.fails = 0
	}
	down := h.fails >= 2
	if down != wasDown || !h.reported {
		h.reported = true
		h.Pool.SetDown(h.Provider, down)
	}
	if down != wasDown && h.OnChange != nil {
		h.OnChange(down, err)
	}
}

func (h *HealthCheck) probe(ctx context.Context) error {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.URL, nil)
	if err != nil {
		return err
	}
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("health check %s answered %d", h.URL, resp.StatusCode)
	}
	return nil
}
