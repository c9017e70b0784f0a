package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"gatehouse/internal/config"
	"gatehouse/internal/provider"
)

// prewarmTimeout bounds how long a generation's pre-warm may take: past
// it, requests dial for themselves as they would have anyway.
const prewarmTimeout = 10 * time.Second

// prewarm opens each provider's first connections when a generation
// starts (at start-up and after every reload, whose new transports have
// none), so the first requests do not pay for the handshakes; a burst
// right after a reload finds them too.
type prewarm struct {
	jobs   []prewarmJob
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

type prewarmJob struct {
	provider string
	client   *http.Client
	url      string
	n        int
}

// add plans the connections of provider p, whose deployment is d: the
// configured count (providers[].prewarm), else provider.DefaultPrewarm —
// except on loopback, where a connect costs microseconds and there is no
// handshake worth saving — for HTTP(S) upstreams reached through the
// transport the registry built.
func (w *prewarm) add(p *config.Provider, d provider.Deployment) {
	u, err := url.Parse(d.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || d.Dialer == nil || d.Client == nil {
		return
	}
	n := provider.DefaultPrewarm
	switch {
	case p.Prewarm != nil:
		n = *p.Prewarm
	case isLoopback(u.Hostname()):
		n = 0
	}
	if n <= 0 {
		return
	}
	w.jobs = append(w.jobs, prewarmJob{provider: p.Name, client: d.Client, url: d.BaseURL, n: n})
}

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// start opens the connections in the background; stop cuts it short.
func (w *prewarm) start(ctx context.Context, log *slog.Logger) {
	if len(w.jobs) == 0 {
		return
	}
	ctx, w.cancel = context.WithTimeout(ctx, prewarmTimeout)
	for _, j := range w.jobs {
		w.wg.Go(func() {
			opened := provider.Prewarm(ctx, j.client, j.url, j.n)
			log.Debug("upstream connections pre-warmed", "provider", j.provider, "wanted", j.n, "opened", opened)
		})
	}
}

// stop cancels a pre-warm still running and waits for it; safe to call
// more than once, and without start.
func (w *prewarm) stop() {
	w.once.Do(func() {
		if w.cancel != nil {
			w.cancel()
			w.wg.Wait()
		}
	})
}
