package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// pool is a small bounded pool of pgx connections. pgx's own pgxpool
// would do, but it needs github.com/jackc/puddle/v2, which this module
// does not carry; what the store needs is little: at most max
// connections, waiters queued with their context, and a connection that
// broke or was left inside a transaction thrown away rather than reused.
type pool struct {
	cfg   *pgx.ConnConfig
	idle  chan *pgx.Conn // at most max
	slots chan struct{}  // one per open connection, idle or in use

	mu     sync.Mutex
	closed bool
}

func newPool(cfg *pgx.ConnConfig, max int) *pool {
	return &pool{cfg: cfg, idle: make(chan *pgx.Conn, max), slots: make(chan struct{}, max)}
}

var errPoolClosed = errors.New("postgres: store closed")

// acquire returns an idle connection, or dials a new one while there is a
// free slot, or waits for either until ctx ends.
func (p *pool) acquire(ctx context.Context) (*pgx.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		select {
		case c := <-p.idle:
			if c.IsClosed() {
				<-p.slots
				continue
			}
			return c, nil
		default:
		}
		select {
		case c := <-p.idle:
			if c.IsClosed() {
				<-p.slots
				continue
			}
			return c, nil
		case p.slots <- struct{}{}:
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				<-p.slots
				return nil, errPoolClosed
			}
			c, err := pgx.ConnectConfig(ctx, p.cfg)
			if err != nil {
				<-p.slots
				return nil, err
			}
			return c, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// release returns c for reuse, unless it is closed, not idle at the
// protocol level (a transaction left open by a failed call), or the pool
// is closed.
func (p *pool) release(c *pgx.Conn) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed || c.IsClosed() || c.PgConn().TxStatus() != 'I' || c.PgConn().IsBusy() {
		closeConn(c)
		<-p.slots
		return
	}
	p.idle <- c // never blocks: a slot was taken for c
}

// close closes the idle connections; those in use close on release.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	for {
		select {
		case c := <-p.idle:
			closeConn(c)
			<-p.slots
		default:
			return
		}
	}
}

// closeConn says goodbye to the server, but gives up quickly on one that
// no longer answers.
func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.Close(ctx)
}
