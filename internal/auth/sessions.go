package auth

import (
	"context"
	"time"
)

// Session is a dashboard login: whoever holds its secret (in a cookie)
// acts with the admin key until Expires. Only the secret's hash is
// stored, as for virtual keys, so a copy of the database logs nobody in.
type Session struct {
	Hash Hash // SHA-256 of the secret the cookie carries
	// AdminKey fingerprints the admin key the session was opened with
	// (never the key, never its plain hash): a changed admin key ends
	// every session opened with the old one.
	AdminKey  Hash
	CreatedAt time.Time
	ExpiresAt time.Time // server-side expiry, whatever the cookie says
}

// SessionStore keeps dashboard sessions where every replica sees them
// (SQLite in embedded mode, PostgreSQL in cluster mode), so a login on one
// replica is valid on all and a logout ends it on all.
type SessionStore interface {
	CreateSession(ctx context.Context, s *Session) error
	// SessionByHash returns the session, expired or not; ErrNotFound when
	// there is none.
	SessionByHash(ctx context.Context, h Hash) (*Session, error)
	// DeleteSession removes the session; removing a missing one is not an
	// error (a double logout is harmless).
	DeleteSession(ctx context.Context, h Hash) error
	// DeleteExpiredSessions removes the sessions that expired before now.
	DeleteExpiredSessions(ctx context.Context, now time.Time) error
}
