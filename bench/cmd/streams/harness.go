// This file starts what a run measures and drives the bursts: mockllm
// once for the whole run, each target afresh for each burst.

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gatehouse/bench/internal/benchcli"
	"gatehouse/bench/internal/proc"
)

const (
	readyTimeout = 15 * time.Second
	benchKey     = "gh-bench-streams-key"
)

type harness struct {
	o        options
	root     *proc.Group // the temp dir and mockllm
	targets  *proc.Group // the target of the current run
	plainBin string
	mockAddr string
	nofile   uint64 // the RLIMIT_NOFILE every process got
	runs     int    // target starts so far, for unique file names
}

// newHarness raises the descriptor limit (inherited by every child),
// builds plainproxy when needed and starts mockllm. The returned harness
// is never nil.
func newHarness(ctx context.Context, o options) (*harness, error) {
	h := &harness{o: o}
	g, err := proc.NewGroup("gatehouse-streams-")
	if err != nil {
		return h, err
	}
	h.root, h.targets = g, &proc.Group{Dir: g.Dir}
	if h.nofile, err = raiseNofile(o.nofile); err != nil {
		return h, err
	}
	for _, t := range o.targets {
		if t.kind == kindPlain && h.plainBin == "" {
			if h.plainBin = o.plainproxy; h.plainBin == "" {
				if h.plainBin, err = proc.BuildPlainproxy(g.Dir); err != nil {
					return h, err
				}
			}
		}
	}
	chunks := o.events - 3 // role, the content chunks, finish, usage
	mock, err := g.Start("mockllm", o.Mockllm, "-listen", "127.0.0.1:0",
		"-chunks", fmt.Sprint(chunks), "-tps", fmt.Sprint(float64(time.Second)/float64(o.gap)),
		"-reply", strings.TrimSpace(strings.Repeat("word ", chunks)), "-record-limit", "-1")
	if err != nil {
		return h, err
	}
	if h.mockAddr, err = mock.WaitListening(ctx, readyTimeout); err != nil {
		return h, err
	}
	return h, nil
}

func (h *harness) close() {
	h.targets.Stop()
	h.root.Close(h.o.Keep, "streams")
}

// raiseNofile sets the soft and hard RLIMIT_NOFILE to want (or keeps a
// larger hard limit), so that neither the harness nor a target runs out of
// descriptors: a proxy holding N streams needs 2N, the harness N. Raising
// the hard limit needs CAP_SYS_RESOURCE; without it the error says so.
// Setting it explicitly also makes Go pass it on to the children instead
// of restoring the limit the harness started with.
func raiseNofile(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	hard := lim.Max
	lim.Cur = want
	if lim.Max < want {
		lim.Max = want
	}
	err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	if err == nil {
		return want, nil
	}
	if hard >= want {
		return 0, fmt.Errorf("set RLIMIT_NOFILE to %d: %w", want, err)
	}
	// Not allowed above the hard limit (no CAP_SYS_RESOURCE, as in many
	// containers): run at the hard limit and say so; the report prints
	// the limit every process had.
	lim.Cur, lim.Max = hard, hard
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("set RLIMIT_NOFILE to %d: %w", hard, err)
	}
	fmt.Fprintf(os.Stderr, "streams: RLIMIT_NOFILE cannot be raised to %d here (%v): running at the hard limit, %d; "+
		"a proxy holding N streams needs 2N descriptors\n", want, err, hard)
	return hard, nil
}

// startTarget starts a fresh process for one run and checks that it
// streams.
func (h *harness) startTarget(ctx context.Context, t targetSpec) (*proc.Proc, string, error) {
	h.runs++
	file := fmt.Sprintf("%03d-%s", h.runs, t.kind)
	opts := proc.Options{Env: t.env}
	var p *proc.Proc
	var addr string
	var err error
	switch t.kind {
	case kindPlain:
		if p, err = h.targets.StartWith(file, opts, h.plainBin, "-listen", "127.0.0.1:0", "-upstream", "http://"+h.mockAddr); err != nil {
			return nil, "", err
		}
		if addr, err = p.WaitListening(ctx, readyTimeout); err != nil {
			return nil, "", err
		}
	default:
		bin := h.o.Gatehouse
		if t.kind == kindBefore || t.kind == kindBeforeH1 {
			bin = h.o.before
		}
		addrs, err := proc.FreePorts(1)
		if err != nil {
			return nil, "", err
		}
		addr = addrs[0]
		cfg := filepath.Join(h.root.Dir, file+".yaml")
		if err := os.WriteFile(cfg, []byte(gatehouseYAML(addr, h.mockAddr, filepath.Join(h.root.Dir, file+".db"), t.kind == kindFullH1 || t.kind == kindBeforeH1)), 0o600); err != nil {
			return nil, "", err
		}
		if p, err = h.targets.StartWith(file, opts, bin, "serve", "--config", cfg); err != nil {
			return nil, "", err
		}
		if err := p.WaitReady(ctx, "http://"+addr+"/readyz", readyTimeout); err != nil {
			return nil, "", err
		}
	}
	url := "http://" + addr + "/v1/chat/completions"
	c := newClient(1)
	defer c.CloseIdleConnections()
	if r := openStream(ctx, c, url, streamBody, nil, nil); r.err != "" || r.events != h.o.events {
		return nil, "", fmt.Errorf("probe %s: %d events of %d, %s\n--- last lines of %s ---\n%s", t.name, r.events, h.o.events, r.err, p.Log, p.Tail(20))
	}
	return p, url, nil
}

// gatehouseYAML is the full stack in embedded mode: a key with rpm, tpm
// and a budget far out of reach (so every stream is estimated, reserved,
// settled and priced), usage records in SQLite, metrics, no cache; with
// h1, HTTP/1.x served by gatehouse's own engine instead of net/http's.
func gatehouseYAML(listen, mock, sqlite string, h1 bool) string {
	engine := ""
	if h1 {
		engine = "server: {http1_engine: gatehouse}\n"
	}
	return engine + fmt.Sprintf(`# Generated by bench/cmd/streams.
listen: %s
storage: {sqlite: %s}
log: {level: info}
providers:
  - {name: mock, type: openai-compatible, base_url: http://%s/v1, api_key: sk-mock}
models:
  - name: gpt-4o-mini
    targets: [{provider: mock, model: gpt-4o-mini}]
keys:
  - {key: %s, project: bench, rpm: 100000000, tpm: 1000000000000, budget: {usd: 1000000000, period: total}}
cache:
  exact: {enabled: false}
  semantic: {enabled: false}
`, listen, sqlite, mock, benchKey)
}

// newClient is the harness's client: one connection per stream, no
// limit on connections, no compression, and a generous dial timeout so
// that a SYN dropped by a full accept queue is retried by the kernel
// rather than counted as a failure of the target.
func newClient(n int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Minute}).DialContext,
		MaxIdleConnsPerHost: n,
		DisableCompression:  true,
		ReadBufferSize:      4096,
	}}
}

// streamBody asks for a stream with usage, so every target carries the
// same events; the prompt is a short chat turn.
var streamBody = []byte(`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},` +
	`"messages":[{"role":"user","content":"Summarise the trade-offs of running an LLM gateway in front of several providers."}]}`)

// probeBody is streamBody answered with one content chunk (the mock's
// directive, which every proxy forwards in the prompt): a probe stream
// ends one gap after its first event.
var probeBody = []byte(`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},` +
	`"messages":[{"role":"user","content":"Summarise the trade-offs of running an LLM gateway in front of several providers. @mock(chunks=1)"}]}`)

// probeEvents is what a probe stream carries: the role chunk, its one
// content chunk, the finish and usage chunks.
const probeEvents = 4

// openStream sends one streaming request and reads it to the end; opened,
// when not nil, is called once the first event has arrived, and written,
// when not nil, once the request is on the wire (or has failed before).
//
// Time to first event runs from the request written, not from the call:
// opening a connection in a burst of thousands waits on the kernel (the
// listener's accept queue holds somaxconn connections; a SYN beyond it is
// retransmitted after 1, 3, 7… s) and on the harness's own goroutines
// getting a CPU, which is neither proxy's doing. That wait is kept apart
// as the connect time.
func openStream(ctx context.Context, c *http.Client, url string, body []byte, opened, written func()) streamResult {
	var r streamResult
	var once sync.Once
	wrote := func() {
		if written != nil {
			once.Do(written)
		}
	}
	defer wrote()
	start := time.Now()
	var sent time.Time
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		sent = time.Now()
		wrote()
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		r.err = err.Error()
		return r
	}
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if !sent.IsZero() {
		r.connect = sent.Sub(start)
	}
	if err != nil {
		r.err = "send: " + trimErr(err)
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		r.err = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		return r
	}
	r.events, r.done, err = readEvents(resp.Body, func() {
		r.ttfe = time.Since(sent)
		if opened != nil {
			opened()
		}
	})
	switch {
	case err != nil:
		r.err = "read: " + trimErr(err)
	case !r.done:
		r.err = "ended without [DONE]"
	}
	return r
}

// trimErr drops the addresses from a network error, so that failures
// group by cause in the report.
func trimErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "127.0.0.1") {
		return s[i+2:]
	}
	return s
}

// burst is one run: n streams opened at once against a fresh target.
type burst struct {
	completed     int
	errs          map[string]int
	idle, peak    uint64  // bytes: VmRSS before the burst, VmHWM over it
	openRSS       uint64  // VmRSS when the last stream got its first event
	maxOpen       int     // the most streams open at once (first event read, end not yet)
	perStream     float64 // KiB: (peak − idle) / n
	p50, p99, max time.Duration
	connectP99    time.Duration
	probes        probeResult
}

// measure runs one burst of n streams against t.
func (h *harness) measure(ctx context.Context, t targetSpec, n int) (burst, error) {
	p, url, err := h.startTarget(ctx, t)
	if err != nil {
		return burst{}, err
	}
	defer h.targets.Stop()
	pid := p.Pid()
	idle, err := readStatus(pid)
	if err != nil {
		return burst{}, err
	}
	// 5 resets VmHWM to the current RSS, so the peak read after the
	// burst is the burst's.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return burst{}, fmt.Errorf("reset the peak RSS of %s: %w", t.name, err)
	}
	c := newClient(n)
	defer c.CloseIdleConnections()
	results := make([]streamResult, n)
	var opened atomic.Int64
	var openRSS atomic.Uint64
	var open, maxOpen atomic.Int64 // streams between their first event and their end
	var ended atomic.Int64         // streams whose reading is over, complete or not
	allOpen, over := make(chan struct{}), make(chan struct{})
	probed := make(chan probeResult, 1)
	go func() { probed <- h.probe(ctx, url, allOpen, over, &ended) }()
	start := make(chan struct{})
	// setting up bounds the connections being opened at once (-dials);
	// nil when unbounded.
	var settingUp chan struct{}
	if h.o.dials > 0 {
		settingUp = make(chan struct{}, h.o.dials)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			var written func()
			if settingUp != nil {
				settingUp <- struct{}{}
				written = func() { <-settingUp }
			}
			first := false
			results[i] = openStream(ctx, c, url, streamBody, func() {
				first = true
				for o := open.Add(1); ; {
					m := maxOpen.Load()
					if o <= m || maxOpen.CompareAndSwap(m, o) {
						break
					}
				}
				if opened.Add(1) == int64(n) {
					if m, err := readStatus(pid); err == nil {
						openRSS.Store(m.rss)
					}
					close(allOpen)
				}
			}, written)
			ended.Add(1)
			if first {
				open.Add(-1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(over)
	probes := <-probed
	if err := ctx.Err(); err != nil {
		return burst{}, err
	}
	after, err := readStatus(pid)
	if err != nil {
		return burst{}, err
	}
	b := burst{errs: map[string]int{}, idle: idle.rss, peak: after.hwm, openRSS: openRSS.Load(), maxOpen: int(maxOpen.Load()), probes: probes}
	var ttfe, connect []time.Duration
	for _, r := range results {
		if r.err == "" && r.events != h.o.events {
			r.err = fmt.Sprintf("%d events instead of %d", r.events, h.o.events)
		}
		if r.err != "" {
			b.errs[r.err]++
			continue
		}
		b.completed++
		ttfe = append(ttfe, r.ttfe)
		connect = append(connect, r.connect)
	}
	slices.Sort(ttfe)
	slices.Sort(connect)
	b.connectP99 = percentile(connect, 0.99)
	b.p50, b.p99 = percentile(ttfe, 0.50), percentile(ttfe, 0.99)
	if len(ttfe) > 0 {
		b.max = ttfe[len(ttfe)-1]
	}
	b.perStream = (float64(b.peak) - float64(b.idle)) / float64(n) / 1024
	return b, nil
}

func readStatus(pid int) (memStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, err
	}
	m, err := parseStatus(string(b))
	if err != nil {
		return m, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return m, nil
}

// cell is every target's result for one count.
type cell struct {
	n    int
	rows []row
}

type row struct {
	name       string
	runs       int
	completed  int // streams completed per run: median over rounds of each round's mean
	maxOpen    int // the most streams open at once: median over rounds of each round's mean
	incomplete int // streams that did not complete, over every run
	errs       map[string]int
	perStream  float64 // KiB, median of rounds (a round: mean of its two runs)
	idleMiB    float64
	peakMiB    float64
	p50, p99   float64 // ms
	connectP99 float64 // ms
	// The probes: medians over rounds of each round's mean, and the fewest
	// probes any run measured (the verdict needs minProbes in every run).
	probeP50, probeP99 float64 // ms
	probesMin          int
	probesFailed       int // over every run
}

// runAll measures every count: rounds of ABBA over the targets.
func (h *harness) runAll(ctx context.Context) ([]cell, error) {
	var cells []cell
	for _, n := range h.o.counts {
		type acc struct {
			perStream, idle, peak, p50, p99, connect, completed, maxOpen []float64
			probeP50, probeP99                                           []float64
			incomplete, probesMin, probesFailed                          int
			errs                                                         map[string]int
		}
		accs := make([]acc, len(h.o.targets))
		for i := range accs {
			accs[i].errs = map[string]int{}
			accs[i].probesMin = -1
		}
		for r := range h.o.Rounds {
			round := make([][]burst, len(h.o.targets))
			for _, i := range benchcli.ABBA(len(h.o.targets)) {
				t := h.o.targets[i]
				b, err := h.measure(ctx, t, n)
				if err != nil {
					return nil, fmt.Errorf("n=%d %s: %w", n, t.name, err)
				}
				fmt.Fprintf(os.Stderr, "  n=%-6d round %d/%d  %-28s %6d/%d complete  %6d open at once  %6.1f KiB/stream  idle %6.1f MiB  peak %7.1f MiB  TTFE p50 %7.2f ms  p99 %8.2f ms  connect p99 %8.2f ms\n",
					n, r+1, h.o.Rounds, t.name, b.completed, n, b.maxOpen, b.perStream, mib(b.idle), mib(b.peak), msf(b.p50), msf(b.p99), msf(b.connectP99))
				if h.o.probes > 0 {
					fmt.Fprintf(os.Stderr, "      probes: %d measured, %d failed, TTFE p50 %7.2f ms  p99 %8.2f ms\n",
						b.probes.measured, b.probes.failed, msf(b.probes.p50), msf(b.probes.p99))
				}
				for e, k := range b.errs {
					fmt.Fprintf(os.Stderr, "      %d× %s\n", k, e)
				}
				round[i] = append(round[i], b)
			}
			for i, bs := range round {
				a := &accs[i]
				var ps, idle, peak, p50, p99, conn, comp, mo, pp50, pp99 float64
				for _, b := range bs {
					k := float64(len(bs))
					ps += b.perStream / k
					idle += mib(b.idle) / k
					peak += mib(b.peak) / k
					p50 += msf(b.p50) / k
					p99 += msf(b.p99) / k
					conn += msf(b.connectP99) / k
					comp += float64(b.completed) / k
					mo += float64(b.maxOpen) / k
					pp50 += msf(b.probes.p50) / k
					pp99 += msf(b.probes.p99) / k
					if a.probesMin < 0 || b.probes.measured < a.probesMin {
						a.probesMin = b.probes.measured
					}
					a.probesFailed += b.probes.failed
					a.incomplete += n - b.completed
					for e, c := range b.errs {
						a.errs[e] += c
					}
				}
				a.perStream = append(a.perStream, ps)
				a.idle = append(a.idle, idle)
				a.peak = append(a.peak, peak)
				a.p50 = append(a.p50, p50)
				a.p99 = append(a.p99, p99)
				a.connect = append(a.connect, conn)
				a.completed = append(a.completed, comp)
				a.maxOpen = append(a.maxOpen, mo)
				a.probeP50 = append(a.probeP50, pp50)
				a.probeP99 = append(a.probeP99, pp99)
			}
		}
		c := cell{n: n}
		for i, t := range h.o.targets {
			a := accs[i]
			c.rows = append(c.rows, row{
				name: t.name, runs: 2 * h.o.Rounds, completed: int(median(a.completed)), maxOpen: int(median(a.maxOpen)), incomplete: a.incomplete, errs: a.errs,
				perStream: median(a.perStream), idleMiB: median(a.idle), peakMiB: median(a.peak),
				p50: median(a.p50), p99: median(a.p99), connectP99: median(a.connect),
				probeP50: median(a.probeP50), probeP99: median(a.probeP99), probesMin: max(a.probesMin, 0), probesFailed: a.probesFailed,
			})
		}
		cells = append(cells, c)
	}
	return cells, nil
}

func mib(b uint64) float64        { return float64(b) / (1 << 20) }
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// probeResult is what the probes of one run saw.
type probeResult struct {
	measured int           // probes that got their first event while every stream of the burst was open
	failed   int           // probes that did not complete (an error status, a refused connection, a cut stream …)
	p50, p99 time.Duration // of the measured probes' time to first event
}

// probe measures the time to first event of a new stream while the burst
// holds its n streams open: once every stream of the burst has had its
// first event (allOpen), it opens -probes streams one after another, each
// on a connection of its own and each a single content chunk long (read
// to its end, not cut: gatehouse keeps reading a stream whose client has
// gone, for its usage, so cut probes would pile up in it and in its
// memory figure), so the target holds at most one stream more than the
// burst.
// The burst's own TTFE is dominated by the burst (thousands of requests
// arriving in the same millisecond queue for the CPU, whichever proxy it
// is); a probe's is the proxy's latency for one stream while it relays n,
// which is what the TTFE goal compares. Probing stops when the
// first stream of the burst ends (ended > 0), so every measured probe ran
// with all n open; a probe that was still running then is not counted.
// over closes when the burst is done, for a burst that never had all n
// open at once.
func (h *harness) probe(ctx context.Context, url string, allOpen, over <-chan struct{}, ended *atomic.Int64) probeResult {
	var res probeResult
	if h.o.probes == 0 {
		return res
	}
	select {
	case <-allOpen:
	case <-over:
		return res
	}
	c := newClient(1)
	c.Transport.(*http.Transport).DisableKeepAlives = true
	defer c.CloseIdleConnections()
	var ttfe []time.Duration
	for range h.o.probes {
		if ended.Load() > 0 || ctx.Err() != nil {
			break
		}
		r := openStream(ctx, c, url, probeBody, nil, nil)
		if ended.Load() > 0 {
			break
		}
		if r.err == "" && r.ttfe > 0 && r.events == probeEvents {
			ttfe = append(ttfe, r.ttfe)
		} else {
			res.failed++
		}
	}
	slices.Sort(ttfe)
	res.measured = len(ttfe)
	res.p50, res.p99 = percentile(ttfe, 0.50), percentile(ttfe, 0.99)
	return res
}
