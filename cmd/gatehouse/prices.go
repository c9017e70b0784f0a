package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gatehouse/internal/tokens"
)

// priceRefresh is how often a cluster replica reloads the prices set
// through the admin API, so a price set on one replica is used by every
// other within this bound (README: "Limits and budgets"). The process
// that takes the write reloads at once.
const priceRefresh = 5 * time.Second

// priceSync keeps the store's price overrides in an in-process Overlay
// that every config generation's catalog reads: the request path never
// queries the store for a price.
type priceSync struct {
	store   tokens.PriceStore
	overlay tokens.Overlay
	log     *slog.Logger

	mu sync.Mutex // one load at a time, so an older read never replaces a newer one

	cancel context.CancelFunc
	done   chan struct{}
}

// startPriceSync loads the stored prices and, when every > 0, reloads
// them on that period until stop.
func startPriceSync(ctx context.Context, ps tokens.PriceStore, every time.Duration, log *slog.Logger) (*priceSync, error) {
	p := &priceSync{store: ps, log: log, done: make(chan struct{})}
	if err := p.load(ctx); err != nil {
		return nil, err
	}
	if every <= 0 {
		close(p.done)
		p.cancel = func() {}
		return p, nil
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	go p.run(loopCtx, every)
	return p, nil
}

func (p *priceSync) run(ctx context.Context, every time.Duration) {
	defer close(p.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			lctx, cancel := context.WithTimeout(ctx, every)
			if err := p.load(lctx); err != nil && ctx.Err() == nil {
				p.log.Warn("prices: reload from the store failed; the last loaded prices stay", "error", err.Error())
			}
			cancel()
		}
	}
}

// load replaces the overlay with what the store holds now.
func (p *priceSync) load(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	list, err := p.store.Prices(ctx)
	if err != nil {
		return fmt.Errorf("load prices: %w", err)
	}
	m := make(map[string]tokens.Price, len(list))
	for _, sp := range list {
		m[sp.Model] = sp.Price()
	}
	p.overlay.Set(m)
	return nil
}

// stop ends the periodic reload.
func (p *priceSync) stop() {
	if p == nil {
		return
	}
	p.cancel()
	<-p.done
}
