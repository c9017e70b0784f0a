// This file starts what a run measures. A run has three lifetimes: the
// harness's (the temp dir, the plainproxy build, PostgreSQL's data
// directory), a layout's (mockllm, Redis and PostgreSQL, placed on the
// layout's CPUs) and a scenario's (the proxies, restarted for each
// scenario so that each CPU profile covers exactly one layout and
// scenario, and each starts from an empty database).

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gatehouse/bench/internal/proc"
)

// harness is one run's processes and what starting them needs.
type harness struct {
	o        options
	root     *proc.Group // the temp dir; its Close removes it
	cpus     []int       // the CPUs the harness may use at start; nil when no layout pins
	plainBin string      // the plainproxy binary
	redisBin string      // redis-server, when the redis target runs
	pg       *postgres   // PostgreSQL's data directory, when the redis target runs

	services *proc.Group // the layout's: mockllm, redis-server, postgres
	proxies  *proc.Group // the scenario's: plainproxy and the gatehouses

	mockAddr, redisAddr, pgURL string     // where the layout's services listen
	redisProc, pgProc          *proc.Proc // the layout's Redis and PostgreSQL, whose CPU cluster targets read
}

// newHarness checks that the run can be done (taskset for the pinned
// layout; Redis and PostgreSQL for the redis target) and prepares what
// every layout shares. The returned harness is never nil.
func newHarness(o options) (*harness, error) {
	h := &harness{o: o}
	g, err := proc.NewGroup("gatehouse-bench-")
	if err != nil {
		return h, err
	}
	h.root, h.services, h.proxies = g, &proc.Group{Dir: g.Dir}, &proc.Group{Dir: g.Dir}
	for _, l := range o.layouts {
		if l == pinned {
			if h.cpus, err = ownCPUs(); err != nil {
				return h, fmt.Errorf("the pinned layout: %w", err)
			}
			if _, err := place(pinned, h.cpus); err != nil {
				return h, err
			}
		}
	}
	if o.targets[plainproxy] {
		if h.plainBin = o.plainproxy; h.plainBin == "" {
			if h.plainBin, err = proc.BuildPlainproxy(g.Dir); err != nil {
				return h, err
			}
		}
	}
	if o.targets[redisMode] || o.targets[leaseMode] || o.targets[baseRedis] {
		if h.redisBin, err = lookRedis(); err != nil {
			return h, err
		}
		if h.pg, err = initPostgres(g.Dir); err != nil {
			return h, err
		}
	}
	if len(h.targetNames()) == 0 {
		return h, errors.New("no targets to measure")
	}
	return h, nil
}

// close stops every process the harness started and removes the temp dir.
func (h *harness) close() {
	h.proxies.Stop()
	h.services.Stop()
	h.root.Close(h.o.Keep, "benchrun")
}

// targetNames are the targets of the run, in run order.
func (h *harness) targetNames() []string {
	var names []string
	for _, t := range targetFlags {
		if h.o.targets[t.name] {
			names = append(names, t.name)
		}
	}
	return names
}

// databaseNice is the nice value Redis and PostgreSQL run at: they are
// served before the load generator, mockllm and the proxy wherever they
// share a CPU, as on machines of their own. At equal priority the
// closed loop kept that CPU busy, PostgreSQL got a sixth of it and wrote
// usage records 20 to 40 times slower than idle; gatehouse's queue of
// records filled and it spilled up to 81% of them, which were written
// after the run: the cluster verdicts measured a database that did a
// fraction of its work (BENCHMARKS.md, "Spilled records replayed as
// fresh ones"). Raising a priority needs root; without it they run at
// 0, and a run that spills is not judged.
const databaseNice = -10

// startServices starts the layout's upstream and, for the redis target,
// Redis and PostgreSQL, all where the layout puts the load.
func (h *harness) startServices(ctx context.Context, pl placement) error {
	// Recording requests clones each one's headers under a lock, work
	// that would share the load's core with Redis and PostgreSQL; no
	// scenario reads them.
	mock, err := h.services.StartWith(pl.layout+"-mockllm", pl.load, h.o.Mockllm, "-listen", "127.0.0.1:0", "-record-limit", "-1")
	if err != nil {
		return err
	}
	if h.mockAddr, err = mock.WaitListening(ctx, readyTimeout); err != nil {
		return err
	}
	if h.redisBin != "" {
		db := pl.load
		db.Nice = databaseNice
		if h.redisAddr, h.redisProc, err = startRedis(ctx, h.services, pl.layout+"-redis", db, h.redisBin); err != nil {
			return err
		}
		if h.pgURL, h.pgProc, err = h.pg.start(ctx, h.services, pl.layout+"-postgres", db); err != nil {
			return err
		}
	}
	return nil
}

// startTargets starts a proxy for every target of the run, where the
// layout puts the process under test, and checks that each answers both
// kinds of request.
func (h *harness) startTargets(ctx context.Context, pl placement, sc scenario) ([]target, error) {
	var targets []target
	prefix := pl.layout + "-" + sc.name + "-"
	for _, name := range h.targetNames() {
		file := prefix + targetFlag(name)
		profile := h.o.profilePath(pl.layout, sc.name, name)
		var tg target
		switch name {
		case direct:
			tg = target{name: name, url: chatURL(h.mockAddr)}
		case plainproxy:
			args := []string{"-listen", "127.0.0.1:0", "-upstream", "http://" + h.mockAddr}
			if profile != "" {
				args = append(args, "-cpuprofile", profile)
			}
			p, err := h.proxies.StartWith(file, pl.proxy, h.plainBin, args...)
			if err != nil {
				return nil, err
			}
			addr, err := p.WaitListening(ctx, readyTimeout)
			if err != nil {
				return nil, err
			}
			tg = target{name: name, url: chatURL(addr), proc: p}
		default:
			var err error
			if tg, err = h.startGatehouse(ctx, pl, name, file, profile); err != nil {
				return nil, err
			}
		}
		targets = append(targets, tg)
	}
	for _, tg := range targets {
		for _, stream := range []bool{false, true} {
			if err := probe(tg, stream); err != nil {
				return nil, err
			}
		}
	}
	return targets, nil
}

// startGatehouse starts one gatehouse target from a generated config.
func (h *harness) startGatehouse(ctx context.Context, pl placement, name, file, profile string) (target, error) {
	addrs, err := proc.FreePorts(1)
	if err != nil {
		return target{}, err
	}
	dir := h.root.Dir
	cached := name == cacheHits || name == cacheMisses
	gc := gatehouseConfig{
		listen:       addrs[0],
		mockAddr:     h.mockAddr,
		sqlite:       filepath.Join(dir, file+".db"),
		limits:       name != noLimits && !cached,
		quietHeaders: name == quiet,
		cached:       cached,
	}
	if cluster(name) {
		gc.redis, gc.postgres = "redis://"+h.redisAddr+"/0", h.pgURL
		if name == baseRedis { // its own schema, and its own keys
			gc.redis, gc.postgres = "redis://"+h.redisAddr+"/1", strings.Replace(h.pgURL, "/postgres?", "/"+baseDatabase+"?", 1)
		}
		gc.spill = filepath.Join(dir, file+"-spill")
		gc.lease = name == leaseMode
	}
	cfg := filepath.Join(dir, file+".yaml")
	if err := os.WriteFile(cfg, []byte(gc.yaml()), 0o600); err != nil {
		return target{}, err
	}
	args := []string{"serve", "--config", cfg}
	if name == bare {
		args = append(args, "--bare")
	}
	if profile != "" {
		args = append(args, "--cpuprofile", profile)
	}
	bin := h.o.Gatehouse
	if name == baseFull || name == baseRedis {
		bin = h.o.base
	}
	p, err := h.proxies.StartWith(file, pl.proxy, bin, args...)
	if err != nil {
		return target{}, err
	}
	if err := p.WaitReady(ctx, "http://"+addrs[0]+"/readyz", readyTimeout); err != nil {
		return target{}, err
	}
	tg := target{name: name, url: chatURL(addrs[0]), proc: p, metrics: "http://" + addrs[0] + "/metrics"}
	if name == cacheMisses {
		tg.header = http.Header{"X-Gatehouse-Cache-Ttl": {"0"}}
	}
	if cluster(name) {
		tg.redis, tg.redisProc, tg.pgProc = h.redisAddr, h.redisProc, h.pgProc
	}
	return tg, nil
}

// cluster reports whether a target runs gatehouse in cluster mode.
func cluster(name string) bool { return name == redisMode || name == leaseMode || name == baseRedis }

func chatURL(addr string) string { return "http://" + addr + "/v1/chat/completions" }

// gatehouseConfig is what a gatehouse target's generated config says.
// The key's limits and budget, when it has them, are far out of reach so
// that the full stack does all its admission work without ever refusing;
// caching is off unless asked for, because a cache hit would skip the
// upstream the baselines must call. Usage records, metrics and cost
// accounting are on, as they are by default.
type gatehouseConfig struct {
	listen, mockAddr string
	sqlite           string // embedded mode's store
	redis, postgres  string // both set: cluster mode
	spill            string // usage.spill_dir; "" for the default beside the SQLite file
	limits           bool   // the key has rpm, tpm and a budget
	quietHeaders     bool   // limits.headers: refusals
	cached           bool   // the exact cache is on
	lease            bool   // limits.lease on (cluster mode)
}

func (c gatehouseConfig) yaml() string {
	key := "  - {key: " + benchKey + ", project: bench}\n"
	if c.limits {
		key = "  - {key: " + benchKey + ", project: bench, rpm: 100000000, tpm: 1000000000000, budget: {usd: 1000000000, period: total}}\n"
	}
	if c.quietHeaders {
		key += "limits: {headers: refusals}\n"
	} else if c.lease {
		key += "limits: {lease: {enabled: true}}\n"
	}
	storage := "storage: {sqlite: " + c.sqlite + "}\n"
	if c.redis != "" {
		storage = "storage: {redis: '" + c.redis + "', postgres: '" + c.postgres + "'}\n"
	}
	if c.spill != "" {
		storage += "usage: {spill_dir: " + c.spill + "}\n"
	}
	return fmt.Sprintf(`# Generated by bench/cmd/benchrun.
listen: %s
%slog: {level: info}
providers:
  - {name: mock, type: openai-compatible, base_url: http://%s/v1, api_key: sk-mock}
models:
  - name: gpt-4o-mini
    targets: [{provider: mock, model: gpt-4o-mini}]
keys:
%scache:
  exact: {enabled: %t}
  semantic: {enabled: false}
`, c.listen, storage, c.mockAddr, key, c.cached)
}

// probe sends one request so that a misconfigured target fails setup with
// its answer and log, instead of producing a table of errors.
func probe(tg target, stream bool) error {
	req, err := http.NewRequest(http.MethodPost, tg.url, bytes.NewReader(requestBody(scenario{stream: stream})))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range tg.header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	switch {
	case err != nil:
	case resp.StatusCode != http.StatusOK:
		err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(body))
	case stream && !bytes.Contains(body, []byte("data: [DONE]")):
		err = fmt.Errorf("stream ended without data: [DONE]: %s", snippet(body))
	default:
		return nil
	}
	err = fmt.Errorf("probe %s (stream=%t): %w", tg.name, stream, err)
	if tg.proc != nil {
		err = fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, tg.proc.Log, tg.proc.Tail(20))
	}
	return err
}
