// Command balance is gatehouse's load-balancing benchmark: it reproduces
// the token-aware balancing experiment of
// ../shared/reference/token-aware-balancer.txt and goes past it. Three
// mockllm processes run its load model (a server's time per token grows
// with the tokens it is processing, ±20% jitter per request); one
// gatehouse per strategy (round-robin, least-requests, least-tokens) sits
// in front of all three; every gatehouse is sent the same seeded request
// sequence by the same number of clients, and the report compares their
// average and tail latency with round-robin's, one table per scenario.
//
// Like benchrun it runs the real binaries over loopback and must not
// import the gatehouse module.
//
// Usage (from bench/):
//
//	go run ./cmd/balance -gatehouse ../bin/gatehouse -mockllm ../bin/mockllm
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gatehouse/bench/internal/benchcli"
	"gatehouse/bench/internal/proc"
)

// Exit codes.
const (
	exitOK     = 0
	exitErrors = 1 // some request failed: the tables are not measurements
	exitSetup  = 2 // a process did not start, a flag was wrong, or Ctrl-C
)

const (
	readyTimeout = 15 * time.Second
	backends     = 3
)

type options struct {
	benchcli.Common
	strategies     []string
	scenarios      []scenario
	seed           uint64
	perToken       time.Duration
	promptPerToken time.Duration
	capacity       int
	jitter         float64
	loadSignal     bool
	simulate       int // >0: sequences to simulate instead of running processes
}

func main() { os.Exit(run()) }

func run() int {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "balance:", err)
		return exitSetup
	}
	if o.simulate > 0 {
		var doc bytes.Buffer
		writeSimulation(io.MultiWriter(os.Stdout, &doc), o, o.simulate)
		if o.Out != "" {
			if err := os.WriteFile(o.Out, doc.Bytes(), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "balance:", err)
				return exitSetup
			}
		}
		return exitOK
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := setup(ctx, o)
	defer func() { b.Close(o.Keep, "balance") }() // setup returns a bench to close even when it fails
	if err != nil {
		fmt.Fprintln(os.Stderr, "balance: setup:", benchcli.Interrupted(ctx, err))
		return exitSetup
	}

	var doc bytes.Buffer
	w := io.MultiWriter(os.Stdout, &doc)
	writeHeader(w, o)
	code := exitOK
	for _, sc := range o.scenarios {
		rows, err := runScenario(ctx, b, o, sc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "balance:", benchcli.Interrupted(ctx, err))
			return exitSetup
		}
		writeTable(w, sc, o.Rounds, rows)
		for _, r := range rows {
			if r.failed > 0 {
				code = exitErrors
			}
		}
	}
	if o.Out != "" {
		if err := os.WriteFile(o.Out, doc.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "balance:", err)
			return exitSetup
		}
	}
	if code == exitErrors {
		fmt.Fprintln(os.Stderr, "balance: FAILED: some requests failed (listed under their table); those figures are not measurements")
	}
	return code
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("balance", flag.ContinueOnError)
	var o options
	o.Register(fs, "required", 3, "times each strategy runs each scenario's sequence (rounds interleave strategies)")
	strategies := fs.String("strategies", "round-robin,least-requests,least-tokens", "comma-separated gatehouse strategies to compare (round-robin is the baseline)")
	scen := fs.String("scenarios", strings.Join(scenarioOrder, ","), "comma-separated: reference, wide")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the request sequences and of the backends' jitter")
	fs.DurationVar(&o.perToken, "per-token", 2*time.Millisecond, "backend time per reply token when idle (mockllm -per-token)")
	fs.DurationVar(&o.promptPerToken, "prompt-per-token", 0, "backend time per prompt token when idle (mockllm -prompt-per-token; 0 = per-token/50)")
	fs.IntVar(&o.capacity, "capacity", 4096, "other requests' in-flight tokens that double a backend's time per token (mockllm -capacity)")
	fs.Float64Var(&o.jitter, "jitter", 0.2, "± share of each request's work (mockllm -jitter)")
	fs.BoolVar(&o.loadSignal, "load-signal", false, "also give gatehouse each backend's /metrics as a llama.cpp load signal")
	stream := fs.Bool("stream", false, "stream the replies (gatehouse lowers in-flight tokens as it relays their chunks)")
	fs.IntVar(&o.simulate, "simulate", 0, "instead of running processes, play this many request sequences through a model of the backends under each strategy and an oracle (simulate.go)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if (o.Gatehouse == "" || o.Mockllm == "") && o.simulate == 0 {
		return o, errors.New("-gatehouse and -mockllm are required")
	}
	if o.Rounds < 1 || o.perToken <= 0 || o.capacity < 1 {
		return o, errors.New("-rounds, -per-token and -capacity must be positive")
	}
	for f := range strings.SplitSeq(*strategies, ",") {
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(o.strategies, f) {
			o.strategies = append(o.strategies, f)
		}
	}
	if len(o.strategies) == 0 {
		return o, errors.New("-strategies: none given")
	}
	for f := range strings.SplitSeq(*scen, ",") {
		sc, ok := scenarios[strings.TrimSpace(f)]
		if !ok {
			return o, fmt.Errorf("-scenarios: unknown scenario %q", f)
		}
		sc.stream = *stream
		o.scenarios = append(o.scenarios, sc)
	}
	return o, o.Absolute()
}

// bench is the running processes.
type bench struct {
	*proc.Group                   // the processes, in start order, and their temp dir
	mocks       []string          // backend addresses
	gateways    map[string]string // strategy → chat completions URL
	gatewayOf   map[string]*proc.Proc
	metrics     *http.Client // for the backends' /metrics
}

// setup starts the backends and one gatehouse per strategy, and sends
// each gatehouse one request. The returned bench is never nil.
func setup(ctx context.Context, o options) (*bench, error) {
	b := &bench{gateways: map[string]string{}, gatewayOf: map[string]*proc.Proc{}, metrics: &http.Client{Timeout: time.Second}}
	g, err := proc.NewGroup("gatehouse-balance-")
	if err != nil {
		return b, err
	}
	b.Group = g
	dir := g.Dir
	for i := range backends {
		p, err := b.Start(fmt.Sprintf("mockllm-%d", i+1), o.Mockllm, "-listen", "127.0.0.1:0", "-record-limit", "-1",
			"-per-token", o.perToken.String(), "-prompt-per-token", o.promptPerToken.String(), "-capacity", strconv.Itoa(o.capacity),
			"-jitter", strconv.FormatFloat(o.jitter, 'g', -1, 64), "-seed", strconv.FormatUint(o.seed, 10))
		if err != nil {
			return b, err
		}
		addr, err := p.WaitListening(ctx, readyTimeout)
		if err != nil {
			return b, err
		}
		b.mocks = append(b.mocks, addr)
	}
	addrs, err := proc.FreePorts(len(o.strategies))
	if err != nil {
		return b, err
	}
	for i, st := range o.strategies {
		name := "gatehouse-" + st
		cfg := filepath.Join(dir, name+".yaml")
		yaml := gatehouseConfig(addrs[i], filepath.Join(dir, name+".db"), st, b.mocks, o.loadSignal)
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			return b, err
		}
		p, err := b.Start(name, o.Gatehouse, "serve", "--config", cfg)
		if err != nil {
			return b, err
		}
		if err := p.WaitReady(ctx, "http://"+addrs[i]+"/readyz", readyTimeout); err != nil {
			return b, err
		}
		url := "http://" + addrs[i] + "/v1/chat/completions"
		if r := send(ctx, newClient(1), url, chatBody(0, 20, 8, false, rand.New(rand.NewPCG(0, 0)))); r.err != "" {
			return b, fmt.Errorf("probe %s: %s\n--- last lines of %s ---\n%s", name, r.err, p.Log, p.Tail(20))
		}
		b.gateways[st], b.gatewayOf[st] = url, p
	}
	return b, nil
}

// gatehouseConfig is one strategy's gateway: the three backends as
// providers of one model, no caching (every request must reach a
// backend), no request log, a key whose limits are out of reach and no
// budget (the mock model has no price).
func gatehouseConfig(listen, sqlite, strategy string, mocks []string, loadSignal bool) string {
	var p, t strings.Builder
	for i, m := range mocks {
		fmt.Fprintf(&p, "  - {name: b%d, type: openai-compatible, base_url: http://%s/v1, api_key: sk-mock", i+1, m)
		if loadSignal {
			p.WriteString(", load: {kind: llama.cpp, interval: 100ms}")
		}
		p.WriteString("}\n")
		fmt.Fprintf(&t, "      - {provider: b%d, model: mock}\n", i+1)
	}
	return fmt.Sprintf(`# Generated by bench/cmd/balance.
listen: %s
storage: {sqlite: %s}
log: {level: warn, requests: false}
providers:
%smodels:
  - name: %s
    strategy: %s
    targets:
%skeys:
  - key: %s
    project: bench
    rpm: 100000000
    tpm: 1000000000000
cache:
  exact: {enabled: false}
  semantic: {enabled: false}
`, listen, sqlite, p.String(), benchModel, strategy, t.String(), benchKey)
}

// runScenario runs sc's sequence through every strategy, rounds times,
// interleaved: round r starts one strategy further along, so a drift in
// machine load spreads over all of them.
func runScenario(ctx context.Context, b *bench, o options, sc scenario) ([]stats, error) {
	seq := generate(sc, o.seed)
	tokens := 0
	for _, r := range seq {
		tokens += r.promptTokens
	}
	fmt.Fprintf(os.Stderr, "balance: %s: %d requests (%d prompt tokens), %d clients, %d round(s) × %d strategies\n",
		sc.name, len(seq), tokens, sc.concurrency, o.Rounds, len(o.strategies))
	client := newClient(sc.concurrency)
	defer client.CloseIdleConnections()
	runs := map[string][]pass{}
	for r := range o.Rounds {
		for i := range o.strategies {
			st := o.strategies[(i+r)%len(o.strategies)]
			rn := drive(ctx, client, b.gateways[st], seq, sc.concurrency, b.load)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := b.gatewayOf[st].Exited(); err != nil {
				return nil, fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, b.gatewayOf[st].Log, b.gatewayOf[st].Tail(20))
			}
			runs[st] = append(runs[st], rn)
			s := summarise(st, []pass{rn})
			fmt.Fprintf(os.Stderr, "  %-9s round %d/%d  %-15s avg %6.3fs  p90 %6.3fs  %5.1fs wall  skew %.2f  %d failed\n",
				sc.name, r+1, o.Rounds, st, s.avg.Seconds(), s.p90.Seconds(), rn.wall.Seconds(), rn.skew, s.failed)
			if err := b.waitIdle(ctx); err != nil {
				return nil, err
			}
		}
	}
	var rows []stats
	for _, st := range o.strategies {
		rows = append(rows, summarise(st, runs[st]))
	}
	return rows, nil
}

// load reads every backend's in-flight tokens; nil if one cannot be read.
func (b *bench) load() []int64 {
	out := make([]int64, len(b.mocks))
	for i, m := range b.mocks {
		n, err := gauge(b.metrics, "http://"+m+"/metrics", "mockllm_tokens_in_flight")
		if err != nil {
			return nil
		}
		out[i] = n
	}
	return out
}

// waitIdle waits until no backend is processing anything, so one run's
// stragglers (a request whose client gave up) do not slow the next.
func (b *bench) waitIdle(ctx context.Context) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for _, m := range b.mocks {
		for {
			n, err := gauge(c, "http://"+m+"/metrics", "mockllm_chat_requests_in_flight")
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("backend %s still busy after 30s (%d in flight, %v)", m, n, err)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// gauge reads one gauge from a mockllm's /metrics.
func gauge(c *http.Client, url, name string) (int64, error) {
	resp, err := c.Get(url)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return -1, errors.New("no " + name + " in " + url)
}

func writeHeader(w io.Writer, o options) {
	fmt.Fprintf(w, "# gatehouse balancing benchmark\n\n")
	prompt := o.promptPerToken
	if prompt == 0 {
		prompt = o.perToken / 50
	}
	fmt.Fprintf(w, "%d mockllm backends: %s per reply token and %s per prompt token when idle, × (1 + other requests' in-flight tokens / %d), ±%.0f%% jitter per request (seed %d)",
		backends, o.perToken, prompt, o.capacity, o.jitter*100, o.seed)
	if o.loadSignal {
		fmt.Fprint(w, "; gatehouse reads each backend's /metrics as a llama.cpp load signal")
	}
	fmt.Fprintf(w, ".\nOne gatehouse per strategy in front of all three; strategies: %s.\n\n", strings.Join(o.strategies, ", "))
}
