// Package postgres is the cluster-mode record store: projects, virtual
// keys and customers in PostgreSQL, shared by every gatehouse replica,
// through pgx. It implements auth.Store; the storetest suite holds it to
// the same contract as the SQLite store.
//
// Key changes reach every replica through LISTEN/NOTIFY: each change
// sends pg_notify in the same transaction as the change, so a
// notification is delivered if and only if the change committed.
//
// Request-path packages must not import it; cmd/gatehouse builds it and
// hands it over behind the auth ports.
package postgres

import (
	"context"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// maxConns bounds the store's connections (the listener has one more of
// its own) unless the DSN sets pool_max_conns. Admin writes are rare and
// key lookups are served from the auth cache, so a replica needs few; a
// hundred replicas must still fit in PostgreSQL's default
// max_connections with room for people.
const maxConns = 8

var errClosed = errors.New("postgres: store closed")

// Store is an auth.Store in a PostgreSQL database (the schema is the
// connection's search_path, "public" unless the DSN says otherwise). It is
// safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	cfg     *pgx.ConnConfig // for the listener's own connection
	channel string          // NOTIFY channel: one per schema, so schemas sharing a database do not hear each other

	hub    store.Hub
	ids    store.IDs // of the projects, keys and customers this Store creates
	mu     sync.Mutex
	lis    *listener // started by the first KeyChanges
	closed bool
}

// Open connects to the database named by dsn (a postgres:// URL or a
// key=value string, as libpq takes, plus pgxpool's pool_* settings) and
// brings its schema up to date. It refuses a database migrated by a newer
// gatehouse.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = maxConns
	}
	// The pool dials lazily, so the first query below is what tells a
	// wrong DSN or a down server.
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{cfg: cfg.ConnConfig, pool: pool}
	var schema string
	err = s.withConn(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema)
	})
	if err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s.channel = "gatehouse_keys." + schema
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return s, nil
}

// migrationLock is the key of the advisory lock migrations hold: a
// constant of gatehouse's own and the schema, so replicas of gateways in
// other schemas of the database do not wait for each other.
const migrationLock = "1734697840, hashtext(current_schema())"

// migrate applies pending migrations in one transaction under an advisory
// lock, so replicas starting together take turns: the first migrates,
// the others then find nothing to do. The lock is per schema and is
// released by the commit (or by the connection dying).
func (s *Store) migrate(ctx context.Context) error {
	ms, err := store.Migrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+migrationLock+`)`); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY,
			name text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		pending, err := store.Pending(ms, current)
		if err != nil {
			return err
		}
		for _, m := range pending {
			// No arguments: pgx sends it as a simple query, so one file
			// may hold several statements.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// Close stops the listener, ends KeyChanges subscriptions and closes the
// connections, waiting for calls still using one to finish.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	lis := s.lis
	s.mu.Unlock()
	if lis != nil {
		lis.stop()
	}
	s.hub.Close()
	s.pool.Close()
	return nil
}

// KeyChanges delivers the key changes committed by any replica on this
// database and schema, normally within milliseconds. The first call
// starts the store's listener connection and returns once it listens, so
// every change committed after KeyChanges returns is delivered. When the
// listener's connection drops it reconnects with backoff and delivers the
// zero Hash, since changes made meanwhile were not heard.
func (s *Store) KeyChanges(ctx context.Context) (<-chan auth.Hash, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if s.lis == nil {
		lis, err := startListener(ctx, s.cfg, s.channel, &s.hub)
		if err != nil {
			return nil, fmt.Errorf("postgres: listen: %w", err)
		}
		s.lis = lis
	}
	return s.hub.Subscribe(ctx)
}

// withConn runs fn on a pooled connection. pgxpool throws away, rather
// than reuses, a connection that broke or that fn left inside a
// transaction or mid-query. A failure to reach the server is marked
// auth.ErrUnavailable, so the admin API answers 503, not 500.
func (s *Store) withConn(ctx context.Context, fn func(*pgx.Conn) error) error {
	return unavailable(s.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return fn(c.Conn()) }))
}

// unavailable marks err with auth.ErrUnavailable when it says the server
// could not be reached or went away, rather than that it refused the
// statement.
func unavailable(err error) error {
	if err == nil || !serverDown(err) || errors.Is(err, auth.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", auth.ErrUnavailable, err)
}

// serverDown reports whether err is a connection failure: no connection
// could be made (refused, timed out, the server starting up or shutting
// down, out of connection slots), or the one in use broke. The caller's
// own cancellation is not one.
func serverDown(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03", "53300": // admin_shutdown, crash_shutdown, cannot_connect_now, too_many_connections
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection_exception
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err)
}

// tx runs fn in a transaction on a pooled connection.
func (s *Store) tx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.withConn(ctx, func(c *pgx.Conn) error {
		return pgx.BeginFunc(ctx, c, fn)
	})
}

// classify maps PostgreSQL constraint failures onto the auth store
// errors. A foreign key can only fail on project_id, so it means the
// project does not exist.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, auth.ErrConflict) || errors.Is(err, auth.ErrNotFound) {
		return fmt.Errorf("%s: %w", what, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%s: %w", what, auth.ErrConflict)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%s: project: %w", what, auth.ErrNotFound)
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, auth.ErrNotFound)
	}
	return fmt.Errorf("postgres: %s: %w", what, err)
}

// hexHash is the NOTIFY payload for h.
func hexHash(h auth.Hash) string { return hex.EncodeToString(h[:]) }

func utc(t time.Time) time.Time { return t.UTC() }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

func budgetArgs(b *auth.Budget) (usd *float64, period *string) {
	if b == nil {
		return nil, nil
	}
	return &b.USD, &b.Period
}

func scanBudget(usd *float64, period *string) *auth.Budget {
	if usd == nil {
		return nil
	}
	b := &auth.Budget{USD: *usd}
	if period != nil {
		b.Period = *period
	}
	return b
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

var _ auth.Store = (*Store)(nil)
