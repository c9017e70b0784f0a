// This file drives the load: a fixed number of clients, each sending its
// next request as soon as the last one is answered (a closed loop, vegeta
// with an unlimited rate and exactly c workers), so every target is asked
// for its best throughput at a given concurrency instead of being fed a
// rate it may not reach. With -rate the load is an open loop instead:
// requests leave at a fixed rate whatever the answers, at most c in
// flight, so that targets of different speeds are compared at one rate
// (a closed loop runs the faster one harder, and its load generator's
// core busier, which moves the latency it measures). It also turns one
// run into a sample: successful requests per second, latency
// percentiles, and what the proxy process spent in CPU and memory while
// serving them.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gatehouse/bench/internal/proc"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// benchKey is the gatehouse key in the generated config; mockllm and the
// plain proxy ignore it.
const benchKey = "gh-bench-key"

// scenario is one kind of request.
type scenario struct {
	name   string
	stream bool
	// usage asks for stream_options.include_usage. Without it gatehouse
	// still asks the upstream for usage (and hides the extra chunk), so
	// the upstream works harder for gatehouse than for the baselines; with
	// it every target carries the same upstream work and the same bytes.
	usage bool
}

// target is one way of reaching mockllm.
type target struct {
	name   string
	url    string      // the chat completions URL
	proc   *proc.Proc  // the process between client and mockllm; nil when direct
	header http.Header // sent with every request besides the key, if any
	redis  string      // the Redis the target uses, whose commands per request are counted; "" for none
	// metrics is gatehouse's /metrics URL, where the records its usage
	// sink spilled are counted; "" for the other targets.
	metrics string
	// redisProc and pgProc are the Redis and PostgreSQL the target uses,
	// whose CPU is read around each run; nil for none.
	redisProc, pgProc *proc.Proc
}

// runSpec is one cell of the matrix, as run against each target.
type runSpec struct {
	scenario
	layout      string // pinned or unpinned
	concurrency int
	// rate is the requests sent a second in an open loop (-rate), at
	// most concurrency of them in flight; 0 is the closed loop.
	rate     int
	warmup   time.Duration // load sent first and discarded: connections, caches, GC pacing
	duration time.Duration
}

// sample is what one run, or the median of several, measured.
type sample struct {
	requests int            // answered requests, failed ones included
	failed   int            // non-200 answers, transport errors, streams without [DONE]
	errs     map[string]int // failure reasons, capped at maxErrKinds
	rps      float64        // successful requests per second
	p50, p99 time.Duration  // over successful requests
	// gwP50 is the median of gatehouse's own x-gatehouse-overhead-ms (the
	// time inside the gateway, upstream waits excluded), in ms; NaN for
	// targets that do not send it.
	gwP50 float64
	// redisCmds is the Redis commands run per request during the run,
	// those inside scripts included, and redisScripts the script calls
	// among them (each one round trip); NaN for targets without Redis.
	redisCmds, redisScripts float64
	// spilled is the usage records gatehouse spilled to disk during the
	// run per request answered (its database did not keep up, or
	// failed); NaN for targets without a usage sink.
	spilled float64
	cores   float64 // CPU seconds the proxy used per second of run; NaN when direct
	rssMiB  float64 // the proxy's peak resident memory during the run; NaN when direct
	other   float64 // cores used during the run by processes not in the benchmark
	spread  float64 // (max−min)/median of rps over all runs of a cell (runCell sets it)
	// redisCores and pgCores are the CPU seconds Redis and PostgreSQL
	// (the postmaster and all its processes) used per second of run: in
	// the pinned layout they share the load generator's core, which is
	// then the bottleneck, so what they take of it is throughput the
	// proxies do not get. They hold all the servers did during the run,
	// the other (idle) targets' background calls included. NaN for
	// targets without them.
	redisCores, pgCores float64
}

// errorRate is the fraction of requests that failed.
func (s sample) errorRate() float64 {
	if s.requests == 0 {
		return 0
	}
	return float64(s.failed) / float64(s.requests)
}

// cpuPerRequest is the proxy's CPU time per successful request in µs, or
// NaN: where the load generator, not the proxy, is the bottleneck (as it
// can be in the pinned layout, where the proxy has a core of its own),
// throughput ties and this is where proxies differ.
func (s sample) cpuPerRequest() float64 { return s.usPerRequest(s.cores) }

// redisPerRequest and pgPerRequest are Redis's and PostgreSQL's CPU time
// per successful request in µs, or NaN.
func (s sample) redisPerRequest() float64 { return s.usPerRequest(s.redisCores) }
func (s sample) pgPerRequest() float64    { return s.usPerRequest(s.pgCores) }

// usPerRequest turns cores used during the run into CPU µs per successful
// request.
func (s sample) usPerRequest(cores float64) float64 {
	if s.rps <= 0 {
		return math.NaN()
	}
	return cores / s.rps * 1e6
}

// meter tells the benchmark's own CPU use from everyone else's: on a
// shared machine, another tenant's compile during one run skews its ratio
// and the report should say so.
type meter struct {
	root int // the harness, which is also the load generator
}

// read returns the CPU time used so far by the harness and every process
// below it (PostgreSQL's backends included, those that exited too), and by
// the whole machine.
func (m meter) read() (ours, machine time.Duration, err error) {
	if ours, err = treeCPU(m.root); err != nil {
		return 0, 0, err
	}
	machine, err = machineBusy()
	return ours, machine, err
}

// measure warms tg up, then runs the timed load against it and reads the
// proxy's CPU and peak memory around exactly that run.
func measure(ctx context.Context, tg target, spec runSpec, m meter) (sample, error) {
	client := newClient(spec.concurrency)
	defer client.CloseIdleConnections()
	body := requestBody(spec.scenario)

	if spec.warmup > 0 {
		attack(ctx, client, tg, body, spec, spec.warmup)
	}
	s := sample{cores: math.NaN(), rssMiB: math.NaN(), redisCmds: math.NaN(), redisScripts: math.NaN(), spilled: math.NaN(),
		redisCores: math.NaN(), pgCores: math.NaN()}
	var cpu0, redisCPU0, pgCPU0 time.Duration
	var spilled0 float64
	var calls0 map[string]uint64
	var err error
	if tg.redis != "" {
		if calls0, err = redisCalls(tg.redis); err != nil {
			return s, fmt.Errorf("redis INFO: %w", err)
		}
	}
	if tg.metrics != "" {
		if spilled0, err = scrapeCounter(tg.metrics, spilledMetric); err != nil {
			return s, err
		}
	}
	if tg.proc != nil {
		if err = resetPeakRSS(tg.proc.Pid()); err != nil {
			return s, fmt.Errorf("reset peak RSS of %s: %w", tg.name, err)
		}
		if cpu0, err = cpuTime(tg.proc.Pid()); err != nil {
			return s, err
		}
	}
	if redisCPU0, err = serverCPU(tg.redisProc); err != nil {
		return s, err
	}
	if pgCPU0, err = serverCPU(tg.pgProc); err != nil {
		return s, err
	}
	ours0, machine0, err := m.read()
	if err != nil {
		return s, err
	}

	t := attack(ctx, client, tg, body, spec, spec.duration)
	if err = ctx.Err(); err != nil {
		return s, err
	}

	if s.redisCores, err = serverCores(tg.redisProc, redisCPU0, t.elapsed); err != nil {
		return s, err
	}
	if s.pgCores, err = serverCores(tg.pgProc, pgCPU0, t.elapsed); err != nil {
		return s, err
	}

	ours1, machine1, err := m.read()
	if err != nil {
		return s, err
	}
	if tg.redis != "" {
		calls1, err := redisCalls(tg.redis)
		if err != nil {
			return s, fmt.Errorf("redis INFO: %w", err)
		}
		var top string
		s.redisCmds, s.redisScripts, top = perRequest(calls0, calls1, len(t.latencies)+t.failed)
		fmt.Fprintf(os.Stderr, "  %s: Redis commands per request: %s\n", tg.name, top)
	}
	if tg.metrics != "" {
		spilled1, err := scrapeCounter(tg.metrics, spilledMetric)
		if err != nil {
			return s, err
		}
		if n := len(t.latencies) + t.failed; n > 0 {
			s.spilled = (spilled1 - spilled0) / float64(n)
		}
	}
	// Clock-tick rounding can make this slightly negative on a quiet machine.
	s.other = max(0, ((machine1-machine0)-(ours1-ours0)).Seconds()/t.elapsed.Seconds())
	if tg.proc != nil {
		if err = tg.proc.Exited(); err != nil {
			return s, err
		}
		cpu1, err := cpuTime(tg.proc.Pid())
		if err != nil {
			return s, err
		}
		peak, err := peakRSS(tg.proc.Pid())
		if err != nil {
			return s, err
		}
		s.cores = (cpu1 - cpu0).Seconds() / t.elapsed.Seconds()
		s.rssMiB = float64(peak) / (1 << 20)
	}
	slices.Sort(t.latencies)
	s.requests = len(t.latencies) + t.failed
	s.failed = t.failed
	s.errs = t.errs
	s.rps = float64(len(t.latencies)) / t.elapsed.Seconds()
	s.p50 = percentile(t.latencies, 0.50)
	s.p99 = percentile(t.latencies, 0.99)
	s.gwP50 = math.NaN()
	if len(t.overhead) > 0 {
		s.gwP50 = middle(t.overhead)
	}
	return s, nil
}

// serverCPU is the CPU time used so far by a server a target uses and
// every process it started; 0 for a server the target does not have.
func serverCPU(p *proc.Proc) (time.Duration, error) {
	if p == nil {
		return 0, nil
	}
	if err := p.Exited(); err != nil {
		return 0, err
	}
	return treeCPU(p.Pid())
}

// serverCores is the CPU seconds per second a server used over elapsed,
// since serverCPU read cpu0; NaN for a server the target does not have.
func serverCores(p *proc.Proc, cpu0, elapsed time.Duration) (float64, error) {
	if p == nil {
		return math.NaN(), nil
	}
	cpu1, err := serverCPU(p)
	if err != nil {
		return 0, err
	}
	return (cpu1 - cpu0).Seconds() / elapsed.Seconds(), nil
}

// newClient returns the load generator's client for one target: one
// keep-alive connection per concurrent client, reused from the warm-up
// into the timed run, and no gzip negotiation.
func newClient(concurrency int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: concurrency,
			DisableCompression:  true,
		},
	}
}

// tally is the raw outcome of one attack.
type tally struct {
	latencies []time.Duration // of successful requests, in arrival order
	overhead  []float64       // x-gatehouse-overhead-ms of successful requests that carry it
	failed    int
	errs      map[string]int
	elapsed   time.Duration // first request sent → last answer read
}

// maxErrKinds caps the distinct failure reasons kept: transport errors
// name their ephemeral ports, so a storm of them would otherwise grow the
// map with every connection.
const maxErrKinds = 20

// attack runs spec.concurrency clients against url for d, each sending
// its next request when its last is answered, or, with spec.rate, sends
// spec.rate requests a second on up to spec.concurrency connections. The
// attacker is new each time (vegeta's cannot be restarted) but the
// client, and so its warm connections, is shared.
//
// In the open loop a target that cannot keep up makes vegeta hold back
// requests until a worker is free, and a request's latency is timed from
// when it was sent, not from when it was due: such a run's latencies say
// too little, which the report flags (keptUp).
func attack(ctx context.Context, client *http.Client, tg target, body []byte, spec runSpec, d time.Duration) tally {
	c := uint64(spec.concurrency)
	atk := vegeta.NewAttacker(
		vegeta.Client(client), // first: the options below adjust its transport
		vegeta.Workers(c),
		vegeta.MaxWorkers(c),
		vegeta.Connections(spec.concurrency),
		vegeta.KeepAlive(true),
	)
	header := http.Header{
		"Authorization": {"Bearer " + benchKey},
		"Content-Type":  {"application/json"},
	}
	for k, v := range tg.header {
		header[k] = v
	}
	tgt := vegeta.NewStaticTargeter(vegeta.Target{Method: http.MethodPost, URL: tg.url, Body: body, Header: header})
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			atk.Stop()
		case <-done:
		}
	}()

	t := tally{errs: map[string]int{}}
	start := time.Now()
	for r := range atk.Attack(tgt, vegeta.Rate{Freq: spec.rate, Per: time.Second}, d, spec.name) {
		if reason := failure(r, spec.stream); reason != "" {
			t.failed++
			if _, ok := t.errs[reason]; !ok && len(t.errs) >= maxErrKinds {
				reason = "(other)"
			}
			t.errs[reason]++
			continue
		}
		t.latencies = append(t.latencies, r.Latency)
		if v := r.Headers.Get("X-Gatehouse-Overhead-Ms"); v != "" {
			if ms, err := strconv.ParseFloat(v, 64); err == nil {
				t.overhead = append(t.overhead, ms)
			}
		}
	}
	t.elapsed = time.Since(start)
	return t
}

// failure says why r does not count as a success, or "" if it does. A
// stream counts only if it ran to its final "data: [DONE]" event: a
// proxy that cut streams short would otherwise look fast.
func failure(r *vegeta.Result, stream bool) string {
	switch {
	case r.Code == 0:
		return r.Error // no response at all
	case r.Code != http.StatusOK:
		return fmt.Sprintf("HTTP %d: %s", r.Code, snippet(r.Body))
	case r.Error != "":
		return r.Error // the body broke off
	case stream && !bytes.Contains(r.Body, []byte("data: [DONE]")):
		return "stream ended without data: [DONE]"
	}
	return ""
}

// snippet shortens a response body to one line for an error summary.
func snippet(b []byte) string {
	const max = 160
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// percentile returns the q-quantile of sorted by the nearest-rank method:
// the smallest value at or above which a fraction q of the values lie. It
// is exact, unlike a digest, because a p99 difference under a millisecond
// is one of the budgets being checked.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// prompt is about 300 bytes, a short chat turn: large enough that a proxy
// which decodes and re-encodes bodies pays for it, small enough that the
// benchmark measures per-request overhead rather than copying.
var prompt = strings.Repeat("Summarise the trade-offs of running an LLM gateway in front of several providers. ", 4)[:300]

// requestBody is the chat completion request every client sends.
func requestBody(sc scenario) []byte {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	var so *streamOptions
	if sc.usage {
		so = &streamOptions{IncludeUsage: true}
	}
	b, err := json.Marshal(struct {
		Model         string         `json:"model"`
		Messages      []message      `json:"messages"`
		Stream        bool           `json:"stream,omitempty"`
		StreamOptions *streamOptions `json:"stream_options,omitempty"`
	}{"gpt-4o-mini", []message{{"user", prompt}}, sc.stream, so})
	if err != nil {
		panic(err) // a fixed value of a fixed type cannot fail to encode
	}
	return b
}

// median combines the samples of several rounds: counts are summed, error
// reasons merged, every measurement is the median of its own values, and
// the noise indicators (other load, rps spread) and the records spilled
// take the worst case.
func median(rounds []sample) sample {
	if len(rounds) == 1 {
		return rounds[0]
	}
	out := sample{errs: map[string]int{}}
	var rps, cores, rss, other, gw, cmds, scripts, redisCores, pgCores []float64
	var p50, p99 []time.Duration
	for _, s := range rounds {
		out.requests += s.requests
		out.failed += s.failed
		for k, n := range s.errs {
			out.errs[k] += n
		}
		rps, cores, rss = append(rps, s.rps), append(cores, s.cores), append(rss, s.rssMiB)
		other = append(other, s.other)
		gw, cmds, scripts = append(gw, s.gwP50), append(cmds, s.redisCmds), append(scripts, s.redisScripts)
		redisCores, pgCores = append(redisCores, s.redisCores), append(pgCores, s.pgCores)
		p50, p99 = append(p50, s.p50), append(p99, s.p99)
	}
	out.rps, out.cores, out.rssMiB = middle(rps), middle(cores), middle(rss)
	out.p50, out.p99 = middle(p50), middle(p99)
	out.gwP50, out.redisCmds, out.redisScripts = middle(gw), middle(cmds), middle(scripts)
	out.redisCores, out.pgCores = middle(redisCores), middle(pgCores)
	// Other tenants' load is a warning, and so is a spill: the worst
	// round is the one to show.
	out.other = slices.Max(other)
	for _, r := range rounds {
		out.spilled = max(out.spilled, r.spilled) // NaN stays NaN
	}
	if out.rps > 0 {
		out.spread = (slices.Max(rps) - slices.Min(rps)) / out.rps
	}
	return out
}

// middle is the median of xs (the mean of the two middle values when
// there is an even number of them). It sorts xs in place.
func middle[T ~int64 | ~float64](xs []T) T {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
