package provider

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// DefaultPrewarm is how many connections Prewarm opens to each provider
// when the config does not say (providers[].prewarm): enough that the
// first requests after a start or a reload skip the TCP and TLS
// handshakes, few enough that no upstream notices.
const DefaultPrewarm = 4

// Prewarm opens n connections to the upstream at baseURL through c and
// leaves them idle in c's transport, so that the first n concurrent
// requests find them ready. It sends n HEAD requests to baseURL at once
// (each needs a connection of its own while it waits), without
// credentials: whatever the upstream answers — 200, 401, 404 — the
// connection is then open and kept alive. It returns how many got an
// answer. A failure is not an error of the gateway: requests dial as they
// would have.
func Prewarm(ctx context.Context, c *http.Client, baseURL string, n int) int {
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodHead, baseURL, nil)
			if err != nil {
				return
			}
			resp, err := c.Do(req)
			if err != nil {
				return
			}
			// Read to the end (HEAD has no body, but a broken server may
			// send one), so the connection goes back to the idle pool.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			ok.Add(1)
		})
	}
	wg.Wait()
	return int(ok.Load())
}
