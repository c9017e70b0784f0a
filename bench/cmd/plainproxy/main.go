// Command plainproxy is the benchmark's baseline: the standard library's
// reverse proxy in front of one upstream, with no gateway logic at all.
// Its throughput is the ceiling a Go proxy can reach on this machine, so
// gatehouse is judged against it rather than against absolute numbers.
// It is tuned only where the defaults would throttle a benchmark (idle
// connections to the upstream) and otherwise left as a user would write it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "plainproxy:", err)
		os.Exit(1)
	}
}

func run(args []string) (err error) {
	fs := flag.NewFlagSet("plainproxy", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (port 0 picks a free port)")
	upstream := fs.String("upstream", "", "upstream base URL, e.g. http://127.0.0.1:9090 (required)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the process to this file, from start until shutdown")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuprofile != "" {
		stop, err := startCPUProfile(*cpuprofile)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	u, err := url.Parse(*upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("-upstream must be an absolute URL, got %q", *upstream)
	}

	rp := httputil.NewSingleHostReverseProxy(u)
	// -1 flushes after every write, so streamed events reach the client
	// as soon as they arrive: the same promise gatehouse makes.
	rp.FlushInterval = -1
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// The default of 2 idle connections per host would make most requests
	// under load dial a fresh upstream connection.
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 1024
	rp.Transport = tr

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           fullDuplex(rp),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "plainproxy listening on %s\n", ln.Addr())

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// fullDuplex lets the proxy keep reading the client's request body after
// the upstream's response headers have been written back. Without it the
// HTTP/1 server closes the inbound body at that moment; when a fast
// upstream answers before the transport has done its final read of the
// body, the transport then fails the write and tears down the upstream
// connection mid-response (golang/go#40747), which cuts about one stream
// in a hundred short. Proxies that buffer the body first never see this.
func fullDuplex(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		h.ServeHTTP(w, r)
	})
}

// startCPUProfile starts profiling into path, as gatehouse serve
// --cpuprofile does, so the benchmark keeps a profile of the baseline
// beside gatehouse's; stop ends it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("-cpuprofile: %w", err)
		}
		return nil
	}, nil
}
