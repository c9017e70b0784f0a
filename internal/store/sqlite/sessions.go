package sqlite

import (
	"context"
	"time"

	"gatehouse/internal/auth"
)

// CreateSession implements auth.SessionStore.
func (s *Store) CreateSession(ctx context.Context, se *auth.Session) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO ui_sessions (hash, admin_key, created_at, expires_at) VALUES (?, ?, ?, ?)`,
		se.Hash[:], se.AdminKey[:], unixMicros(se.CreatedAt), unixMicros(se.ExpiresAt))
	return classify(err, "session")
}

// SessionByHash implements auth.SessionStore.
func (s *Store) SessionByHash(ctx context.Context, h auth.Hash) (*auth.Session, error) {
	var admin []byte
	var created, expires int64
	err := s.r.QueryRowContext(ctx, `SELECT admin_key, created_at, expires_at FROM ui_sessions WHERE hash = ?`, h[:]).
		Scan(&admin, &created, &expires)
	if err != nil {
		return nil, classify(err, "session")
	}
	se := &auth.Session{Hash: h, CreatedAt: time.UnixMicro(created).UTC(), ExpiresAt: time.UnixMicro(expires).UTC()}
	copy(se.AdminKey[:], admin)
	return se, nil
}

// DeleteSession implements auth.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, h auth.Hash) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM ui_sessions WHERE hash = ?`, h[:])
	return classify(err, "session")
}

// DeleteExpiredSessions implements auth.SessionStore.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM ui_sessions WHERE expires_at < ?`, unixMicros(now))
	return classify(err, "expired sessions")
}
