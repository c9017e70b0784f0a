package postgres

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

// Reconnect backoff of the listener: quick first retries for a blip
// (a failover, a restarted pooler), capped so a long outage costs little.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// listener owns one connection that LISTENs on the store's channel and
// publishes what it hears to the store's hub.
type listener struct {
	cfg     *pgx.ConnConfig
	channel string
	hub     *store.Hub
	cancel  context.CancelFunc
	done    chan struct{}
	pid     atomic.Uint32 // backend PID of the current connection, for tests
}

// startListener connects and LISTENs before returning, so the caller can
// promise delivery of every change committed afterwards; then it keeps
// listening in its own goroutine until stop.
func startListener(ctx context.Context, cfg *pgx.ConnConfig, channel string, hub *store.Hub) (*listener, error) {
	l := &listener{cfg: cfg, channel: channel, hub: hub, done: make(chan struct{})}
	c, err := l.connect(ctx)
	if err != nil {
		return nil, err
	}
	// The loop must outlive the ctx of the KeyChanges call that started
	// it: it serves every later subscriber until the store closes.
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	go l.run(loopCtx, c)
	return l, nil
}

func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		closeConn(c)
		return nil, err
	}
	l.pid.Store(c.PgConn().PID())
	return c, nil
}

func (l *listener) stop() {
	l.cancel()
	<-l.done
}

func (l *listener) run(ctx context.Context, c *pgx.Conn) {
	defer close(l.done)
	defer func() {
		if c != nil {
			closeConn(c)
		}
	}()
	for {
		n, err := c.WaitForNotification(ctx)
		if err == nil {
			var h auth.Hash
			if len(n.Payload) == 2*len(h) {
				if _, err := hex.Decode(h[:], []byte(n.Payload)); err == nil {
					l.hub.Publish(h)
				}
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		// The connection is gone (server restart, failover, a proxy's
		// idle timeout): reconnect, and since whatever was committed
		// meanwhile went unheard, tell every cache to start over.
		closeConn(c)
		c = l.reconnect(ctx)
		if c == nil {
			return
		}
		l.hub.FlushAll()
	}
}

// reconnect retries with jittered exponential backoff until it listens
// again or ctx ends (then it returns nil).
func (l *listener) reconnect(ctx context.Context) *pgx.Conn {
	wait := minBackoff
	for {
		jitter := time.Duration(rand.Int64N(int64(wait) / 2))
		select {
		case <-time.After(wait/2 + jitter):
		case <-ctx.Done():
			return nil
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := l.connect(cctx)
		cancel()
		if err == nil {
			return c
		}
		wait = min(2*wait, maxBackoff)
	}
}

// closeConn says goodbye to the server, but gives up quickly on one that
// no longer answers.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Close(ctx)
}
