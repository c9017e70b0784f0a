// Command mockllm runs the fake OpenAI upstream of internal/mockllm as its
// own process, for benchmarks and demos where the gateway must reach its
// upstream over a real socket. It owns only flag parsing and the server's
// lifecycle; all behaviour lives in the package.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"gatehouse/internal/mockllm"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mockllm:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	var o mockllm.Options
	listen := fs.String("listen", "127.0.0.1:9090", "address to listen on (port 0 picks a free port)")
	fs.DurationVar(&o.Latency, "latency", 0, "delay before a non-streamed response")
	fs.DurationVar(&o.TTFT, "ttft", 0, "delay before the first streamed chunk")
	fs.Float64Var(&o.TokensPerSecond, "tps", 0, "streamed tokens per second (0 = as fast as possible)")
	fs.IntVar(&o.Chunks, "chunks", 8, "content chunks per streamed reply")
	fs.IntVar(&o.ErrorStatus, "error-status", 0, "answer with this HTTP status in OpenAI's error shape")
	fs.Float64Var(&o.ErrorRate, "error-rate", 0, "fraction of requests that get -error-status (0 = all)")
	fs.StringVar(&o.RetryAfter, "retry-after", "", "Retry-After value sent with injected errors")
	fs.StringVar(&o.APIKey, "api-key", "", "require Authorization: Bearer <key>")
	models := fs.String("models", "", "comma-separated model ids for /v1/models (default: a few OpenAI ids)")
	fs.StringVar(&o.Reply, "reply", "", "fixed reply text (default: quotes the last user message)")
	fs.IntVar(&o.RecordLimit, "record-limit", 100, "requests kept for /mock/requests (negative disables recording)")
	fs.DurationVar(&o.Load.PerToken, "per-token", 0, "load model: time to generate a reply token on an idle server (0 = off)")
	fs.DurationVar(&o.Load.PromptPerToken, "prompt-per-token", 0, "load model: time to read a prompt token on an idle server (0 = per-token/50, negative = free)")
	fs.IntVar(&o.Load.Capacity, "capacity", 4096, "load model: in-flight tokens that double the time per token")
	fs.Float64Var(&o.Load.Jitter, "jitter", 0.2, "load model: ± share each request's work varies by (negative = none)")
	fs.Uint64Var(&o.Load.Seed, "seed", 1, "load model: seed of the per-request jitter")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for m := range strings.SplitSeq(*models, ",") {
		if m = strings.TrimSpace(m); m != "" {
			o.Models = append(o.Models, m)
		}
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           mockllm.New(o),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// No ReadTimeout or WriteTimeout: streams and hang tests are
		// meant to last as long as the client wants.
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "mockllm listening on %s\n", ln.Addr())

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Hanging and stalled requests never finish on their own, so the
	// grace period is short and whatever is left is closed.
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
