package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"gatehouse/internal/asynclog"
	"gatehouse/internal/certfile"
	"gatehouse/internal/config"
	"gatehouse/internal/framing"
	"gatehouse/internal/h1"
	"gatehouse/internal/metrics"
	"gatehouse/internal/provider"
	"gatehouse/internal/server"
	"gatehouse/internal/telemetry"
)

// gateway is a running gatehouse: the HTTP server plus the config
// generation it serves, which reloads replace.
type gateway struct {
	path string
	bare bool
	log  *slog.Logger

	srv   *server.Server
	st    *stores            // opened once per process, closed when run returns
	types *provider.Registry // the provider types config and wiring draw on
	mu    sync.Mutex         // serialises reloads
	gen   *generation
	bg    context.Context // generations' background work runs under it; set by run
	// providers are the running config's provider names, to tell which
	// ones a reload removed.
	providers map[string]bool

	metrics *metrics.Metrics  // the process's instruments (nil for a bare proxy), handed to every generation
	tracer  *telemetry.Tracer // the process's span exporter (nil: traces off), handed to every generation
	traces  *config.Traces    // the settings it was started with: a reload cannot change them
	// listener is what the listening socket and http.Server were built
	// with: a reload cannot change it either.
	listener listenerSettings
}

// listenerSettings are the settings fixed when the listener starts
// (server.max_body_bytes is not among them: it applies per generation).
type listenerSettings struct {
	listen                             string
	readHeaderTimeout, bodyReadTimeout config.Duration
	shutdownGrace                      config.Duration
	maxHeaderBytes                     int64
	h2c                                bool
	http1Engine                        string
	tls                                config.TLS // zero: plain HTTP
}

func listenerOf(cfg *config.Config) listenerSettings {
	s := cfg.Server
	l := listenerSettings{listen: cfg.Listen, readHeaderTimeout: s.ReadHeaderTimeout, bodyReadTimeout: s.BodyReadTimeout,
		shutdownGrace: s.ShutdownGrace, maxHeaderBytes: s.MaxHeaderBytes, h2c: s.H2C == nil || *s.H2C,
		http1Engine: s.HTTP1Engine}
	if s.TLS != nil {
		l.tls = *s.TLS
	}
	return l
}

func serve(path string, bare bool) error {
	types := providerTypes()
	cfg, err := config.Load(path, types)
	if err != nil {
		return err
	}
	logOut := asynclog.New(os.Stderr, 8192)
	defer logOut.Close()
	log := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: logLevel(cfg.Log.Level)}))
	stopHeapSampling() // no heap profiles are served (heapsampling.go)
	if limit := setMemoryLimit(); limit != "" {
		log.Info("Go memory limit set from the container's (GOMEMLIMIT unset)", "bytes", limit)
	}
	// The collector waits for 64 MiB of heap (or twice the live heap)
	// before a cycle, unless GOGC says otherwise (gcfloor.go).
	gc := startGCFloor(gcHeapFloor)
	defer gc.stop()
	startStackProbe()

	g, err := newGateway(path, cfg, types, bare, log, logOut)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return g.run(ctx, ln, cfg)
}

// newGateway opens the stores and builds the first generation. logOut, when
// not nil, is the writer under log's JSON handler: request lines are
// encoded by hand and written there (server.SetRequestLog).
func newGateway(path string, cfg *config.Config, types *provider.Registry, bare bool, log *slog.Logger, logOut io.Writer) (*gateway, error) {
	return newPacedGateway(path, cfg, types, bare, log, logOut, pacing{})
}

// newPacedGateway is newGateway with its background writers paced by p
// (benchmarks; pacing{} is production).
func newPacedGateway(path string, cfg *config.Config, types *provider.Registry, bare bool, log *slog.Logger, logOut io.Writer, p pacing) (*gateway, error) {
	st, err := openStores(cfg, bare, log, p)
	if err != nil {
		return nil, err
	}
	gen, err := build(cfg, types, bare, st, log)
	if err != nil {
		st.close()
		return nil, err
	}
	var m *metrics.Metrics
	if !bare {
		m = metrics.New()
		if st.sink != nil {
			m.UsageSink(st.sink)
		}
		if st.cache != nil {
			m.Cache(st.cache.Memory())
		}
		if st.limiter != nil && st.limiter.settles != nil {
			m.Settles(st.limiter.settles)
			m.Admissions(st.limiter.admits)
		}
	}
	var tracer *telemetry.Tracer
	if tr := cfg.Telemetry.Traces; tr != nil && !bare {
		if tracer, err = startTracer(tr); err != nil {
			st.close()
			return nil, err
		}
	}
	gen.instrument(m)
	gen.runtime.Tracer = tracer
	srv := server.New(gen.runtime, log)
	if logOut != nil {
		srv.SetRequestLog(logOut)
	}
	return &gateway{path: path, bare: bare, log: log, gen: gen, st: st, types: types, metrics: m, tracer: tracer, traces: cfg.Telemetry.Traces, listener: listenerOf(cfg), srv: srv,
		providers: providerNames(cfg)}, nil
}

// startTracer starts the OTLP exporter of telemetry.traces.
func startTracer(tr *config.Traces) (*telemetry.Tracer, error) {
	if tr.Endpoint == "" && os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, telemetry.ErrNoEndpoint
	}
	return telemetry.New(context.Background(), telemetry.Options{Endpoint: tr.Endpoint, SampleRatio: *tr.SampleRatio, Version: currentVersion().Version})
}

// run serves on ln until ctx ends, then drains: readiness fails at once,
// new connections are refused, and in-flight requests and streams get up
// to the configured grace period to finish.
func (g *gateway) run(ctx context.Context, ln net.Listener, cfg *config.Config) error {
	hs := &http.Server{
		Handler: g.srv.Guarded(server.Guard{MaxHeaderBytes: cfg.Server.MaxHeaderBytes, BodyReadTimeout: cfg.Server.BodyReadTimeout.D()}),
		// No ReadTimeout or WriteTimeout: they would bound a whole
		// request or response, and streams last minutes. Slow clients
		// are bounded by ReadHeaderTimeout and the guard's body timeout.
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout.D(),
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    int(cfg.Server.MaxHeaderBytes),
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		Protocols:         serverProtocols(cfg.Server),
		ConnContext:       connContext(g.bare),
		// OPTIONS * goes to the handler like every request: the guard
		// counts a connection's requests to tell them apart.
		DisableGeneralOptionsHandler: true,
	}
	// Header sections over the limit are answered in the caller's dialect
	// by the connection watcher, before net/http would answer them in
	// plain text.
	tooLarge := g.srv.HeaderRefusal(cfg.Server.MaxHeaderBytes)
	if t := cfg.Server.TLS; t != nil {
		certs, err := certfile.Load(t.CertFile, t.KeyFile)
		if err != nil {
			return err
		}
		certs.OnError = func(err error) { g.log.Error("TLS certificate reload", "error", err.Error()) }
		// Handshakes run before net/http sees a connection (ListenTLS), so
		// read_header_timeout bounds them as it bounds the headers.
		ln = framing.ListenTLS(tls.NewListener(ln, certs.Config()), hs.MaxHeaderBytes, hs.ReadHeaderTimeout, tooLarge)
	} else {
		ln = framing.Listen(ln, hs.MaxHeaderBytes, tooLarge)
	}
	// SIGHUP is caught before the listener announces itself: its default
	// action ends the process, so a reload asked for early must not kill it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	g.mu.Lock()
	g.bg = ctx
	g.gen.start(ctx, g.log)                // discovered models are routable before the first request
	adminOff := g.gen.runtime.Admin == nil // read now: a reload may replace g.gen once the watcher runs
	g.mu.Unlock()
	pruned := make(chan struct{})
	pruneCtx, stopPruning := context.WithCancel(ctx)
	if rs := g.st.responseStore(); rs != nil && g.st.usage.Retention > 0 {
		go retainResponses(pruneCtx, rs, g.st.usage.Retention.D(), g.log, pruned)
	} else {
		close(pruned)
	}
	defer func() {
		g.mu.Lock()
		g.gen.stop()
		g.mu.Unlock()
		stopPruning()
		<-pruned
		if err := g.st.close(); err != nil {
			g.log.Error("closing the record store", "error", err.Error())
		}
		tctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := g.tracer.Shutdown(tctx); err != nil { // the last spans go out
			g.log.Warn("exporting the last spans", "error", err.Error())
		}
		cancel()
	}()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go g.watch(watchCtx, cfg, hup)

	serveErr := make(chan error, 1)
	// With server.http1_engine: gatehouse, the gateway's own server takes
	// every connection and hands the HTTP/2 ones to net/http's.
	var engine *h1.Server
	if cfg.Server.HTTP1Engine == config.EngineGatehouse {
		handoff := h1.NewHandoff(ln.Addr())
		engine = &h1.Server{Handler: hs.Handler, ReadHeaderTimeout: hs.ReadHeaderTimeout, IdleTimeout: hs.IdleTimeout,
			MaxHeaderBytes: hs.MaxHeaderBytes, ConnContext: hs.ConnContext, ErrorLog: hs.ErrorLog,
			HTTP2: handoff.Put, H2C: hs.Protocols.UnencryptedHTTP2(), NotePrefix: server.FieldPrefix}
		go func() { _ = hs.Serve(handoff) }()
		go func() { serveErr <- engine.Serve(ln) }()
	} else {
		go func() { serveErr <- hs.Serve(ln) }()
	}
	mode := "gateway"
	if g.bare {
		mode = "bare proxy"
	}
	scheme := "http"
	if cfg.Server.TLS != nil {
		scheme = "https"
	}
	g.log.Info("gatehouse listening", "addr", ln.Addr().String(), "scheme", scheme, "mode", mode, "config", g.path, "store", g.st.desc)
	if adminOff && !g.bare {
		g.log.Warn("admin API disabled: set admin_key in the config to enable /admin/")
	}
	fmt.Fprintf(os.Stderr, "gatehouse listening on %s\n", ln.Addr())

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	grace := cfg.Server.ShutdownGrace.D()
	g.log.Info("shutting down: draining in-flight requests", "grace", grace.String())
	g.srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	shutdown := make(chan error, 1)
	if engine != nil {
		go func() { shutdown <- engine.Shutdown(sctx) }()
	} else {
		shutdown <- nil
	}
	err := hs.Shutdown(sctx)
	if e := <-shutdown; err == nil {
		err = e
	}
	if err != nil {
		g.log.Warn("grace period over: closing remaining connections", "error", err.Error())
		_ = hs.Close()
		if engine != nil {
			_ = engine.Close()
		}
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	g.log.Info("stopped")
	return nil
}

// serverProtocols is HTTP/1.1, HTTP/2 where TLS negotiates it, and
// HTTP/2 over plain TCP for clients that open with its preface unless
// server.h2c is off.
func serverProtocols(c config.Server) *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(c.H2C == nil || *c.H2C)
	return p
}

// watch reloads the config on SIGHUP and whenever its file changes.
func (g *gateway) watch(ctx context.Context, running *config.Config, hup <-chan os.Signal) {
	w := config.NewWatcher(g.path, g.types, g.apply, func(err error) {
		g.log.Error("config reload rejected; keeping the running config", "error", err.Error())
	})
	w.SetCurrent(running)
	go func() {
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			g.log.Error("config file watch stopped", "error", err.Error())
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			g.log.Info("SIGHUP: reloading config")
			w.Trigger()
		}
	}
}

// apply swaps in a new config generation. Requests already running keep
// the old one until they finish.
func (g *gateway) apply(cfg *config.Config) {
	g.st.warnChanged(cfg, g.log)
	gen, err := build(cfg, g.types, g.bare, g.st, g.log)
	if err != nil {
		g.log.Error("config reload rejected; keeping the running config", "error", err.Error())
		return
	}
	g.mu.Lock()
	if g.gen != nil {
		gen.routing.pool.Inherit(g.gen.routing.pool) // breakers and latencies survive the reload
	}
	gen.instrument(g.metrics) // after Inherit: the breaker gauges show the inherited states
	gen.runtime.Tracer = g.tracer
	if !sameTraces(cfg.Telemetry.Traces, g.traces) {
		g.log.Warn("telemetry settings changed: restart gatehouse to use them; the running exporter stays")
	}
	if listenerOf(cfg) != g.listener {
		g.log.Warn("listen or server settings changed: restart gatehouse to use them (server.max_body_bytes applies at once); the running listener stays")
	}
	if g.gen != nil {
		gen.forgetRemoved(g.gen, g.metrics)
	}
	gen.start(g.bg, g.log)
	old := g.gen
	g.gen = gen
	var removed []string
	if g.providers != nil {
		removed = removedProviders(g.providers, providerNames(cfg))
	}
	g.providers = providerNames(cfg)
	g.mu.Unlock()
	g.srv.Swap(gen.runtime)
	if old != nil {
		old.stop()
	}
	g.log.Info("config reloaded", "providers", len(cfg.Providers), "models", len(cfg.Models), "keys", len(cfg.Keys))
	if g.st != nil {
		g.st.limiter.releaseLeases(g.log)
		if len(removed) > 0 && g.bg != nil {
			warnRemovedProviders(g.bg, g.st.store, removed, time.Now(), g.log)
		}
	}
	if old != nil {
		time.AfterFunc(time.Minute, old.close)
	}
}

// sameTraces reports whether two telemetry.traces settings are equal.
func sameTraces(a, b *config.Traces) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Endpoint == b.Endpoint && *a.SampleRatio == *b.SampleRatio
}

func logLevel(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
