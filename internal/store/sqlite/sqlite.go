// Package sqlite is the embedded-mode record store: projects, virtual keys
// and customers in one SQLite file, through the pure-Go modernc.org/sqlite
// driver so the gateway stays a single static binary. It implements
// auth.Store; the storetest suite holds it to the same contract as the
// PostgreSQL store.
//
// Request-path packages must not import it; cmd/gatehouse builds it and
// hands it over behind the auth ports.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// timeLayout is fixed-width, so stored times compare correctly as text
// (expiry checks and TouchKeys rely on that), and keeps the microseconds
// every store keeps.
const timeLayout = "2006-01-02T15:04:05.000000Z"

// busyTimeout is how long a statement waits for a lock another process
// holds (a second gatehouse or the sqlite3 shell on the same file) before
// failing; inside this process writers queue on the write pool instead.
const busyTimeout = 5 * time.Second

// Store is an auth.Store in a SQLite file. It is safe for concurrent use.
//
// It keeps two pools on the file. SQLite lets one connection write at a
// time; with several writer connections, two transactions that both read
// and then write fail with SQLITE_BUSY at once (busy_timeout cannot help
// an upgrade from a read lock in WAL mode), which is the familiar
// "database is locked". So every write goes through a pool of exactly one
// connection, where Go's pool queues writers in-process, and its
// transactions BEGIN IMMEDIATE, taking the write lock up front. Reads use
// a separate pool of query-only connections that WAL lets run alongside
// the writer, so a key lookup never waits behind an admin write.
type Store struct {
	w, r      *sql.DB
	keyByHash *sql.Stmt // the cache-miss path, prepared once per read connection
	hub       store.Hub
	ids       store.IDs // of the projects, keys and customers this Store creates

	insertMu sync.Mutex
	records  recordWriter // the usage records' and the spend flush's statements on the writer connection; prepared on first use

	decoded atomic.Int64 // record batches the readers decoded: tests hold them to skipping the rest
}

// Options are what OpenWith takes beyond the path; the zero value is
// Open's.
type Options struct {
	// Log gets the progress of the one-time work Open may do before it
	// returns (moving an old database's records into batches, about a
	// minute per million); nil logs nothing.
	Log *slog.Logger

	// moveLogRows is how many records are moved between two progress
	// lines; 0 is moveLogEvery. Tests set it to see lines from a small
	// database.
	moveLogRows int
}

// Open is OpenWith without a log.
func Open(ctx context.Context, path string) (*Store, error) {
	return OpenWith(ctx, path, Options{})
}

// OpenWith opens (creating if needed) the database at path and brings its
// schema up to date. It refuses a database migrated by a newer gatehouse.
func OpenWith(ctx context.Context, path string, o Options) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: bad database path %q", path)
	}
	common := url.Values{}
	common.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	common.Add("_pragma", "foreign_keys(1)")

	wq := cloneValues(common)
	// WAL is a property of the file, set once by the writer; it is what
	// lets the read pool run while a write is in progress. synchronous
	// stays at its default (FULL): admin writes are rare and TouchKeys
	// batches, so durability costs little here.
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Set("_txlock", "immediate")
	w := sql.OpenDB(writerConnector{dsn: path + "?" + wq.Encode(), d: newWriterDriver()})
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)

	s := &Store{w: w}
	if err := s.migrateWhenFree(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
	}
	// The move of an old database's records is not bound by the caller's
	// start-up deadline: a million rows take about a minute, and a
	// deadline would only make every start fail part-way (each moved
	// chunk is kept, so it would finish after enough restarts). It says
	// how far it is instead.
	if err := s.moveRecordRows(context.WithoutCancel(ctx), newMoveLog(o.Log, o.moveLogRows)); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: %s: %w", path, err)
	}

	rq := cloneValues(common)
	rq.Add("_pragma", "query_only(1)") // a bug in a read path cannot write
	r, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	s.r = r
	s.keyByHash, err = r.PrepareContext(ctx, keyByHashSQL)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: prepare: %w", err)
	}
	return s, nil
}

func cloneValues(v url.Values) url.Values {
	c := url.Values{}
	for k, vs := range v {
		c[k] = append([]string(nil), vs...)
	}
	return c
}

// migrateWhenFree is migrate, tried again while the file is busy. Two
// processes opening a new file at once race to set it up (WAL, the
// schema), and the loser can get SQLITE_BUSY at once rather than after
// busy_timeout (TestConcurrentOpens saw it about once in thirty runs). A
// try that got SQLITE_BUSY changed nothing (migrate is one transaction);
// the tries stop after busyTimeout, as one statement's wait would.
func (s *Store) migrateWhenFree(ctx context.Context) error {
	deadline := time.Now().Add(busyTimeout)
	for {
		err := s.migrate(ctx)
		var se *sqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// migrate applies the pending embedded migrations in one transaction, so
// a crash midway leaves the previous schema, never half of the next.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := store.Migrations(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY,
			name TEXT NOT NULL,
			applied_at TEXT NOT NULL)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var current int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		pending, err := store.Pending(ms, current)
		if err != nil {
			return err
		}
		for _, m := range pending {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name, fmtTime(store.Now())); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// Close ends KeyChanges subscriptions and closes the database.
func (s *Store) Close() error {
	s.hub.Close()
	var errs []error
	if s.keyByHash != nil {
		errs = append(errs, s.keyByHash.Close())
	}
	errs = append(errs, s.closeRecordWriter())
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

// KeyChanges delivers changes made through this Store as soon as they
// commit. A second process writing the same file is not seen: embedded
// mode is one gateway per database.
func (s *Store) KeyChanges(ctx context.Context) (<-chan auth.Hash, error) {
	return s.hub.Subscribe(ctx)
}

// tx runs fn in a write transaction (BEGIN IMMEDIATE on the single writer).
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// classify maps SQLite constraint failures onto the auth store errors.
// A foreign key can only fail on project_id, so it means the project
// does not exist.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%s: %w", what, auth.ErrConflict)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%s: project: %w", what, auth.ErrNotFound)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, auth.ErrNotFound)
	}
	return fmt.Errorf("sqlite: %s: %w", what, err)
}

func fmtTime(t time.Time) string { return store.Time(t).Format(timeLayout) }

func fmtTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return fmtTime(*t)
}

func parseTime(s string) (time.Time, error) { return time.Parse(timeLayout, s) }

func parseTimePtr(ns sql.NullString) (*time.Time, error) {
	if !ns.Valid {
		return nil, nil
	}
	t, err := parseTime(ns.String)
	return &t, err
}

func budgetArgs(b *auth.Budget) (usd, period any) {
	if b == nil {
		return nil, nil
	}
	return b.USD, b.Period
}

func scanBudget(usd sql.NullFloat64, period sql.NullString) *auth.Budget {
	if !usd.Valid {
		return nil
	}
	return &auth.Budget{USD: usd.Float64, Period: period.String}
}

// scanner is what *sql.Row and *sql.Rows share.
type scanner interface{ Scan(dest ...any) error }

var _ auth.Store = (*Store)(nil)
