package postgres

import (
	"context"
	"time"

	"gatehouse/internal/auth"
)

// CreateSession implements auth.SessionStore.
func (s *Store) CreateSession(ctx context.Context, se *auth.Session) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO ui_sessions (hash, admin_key, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		se.Hash[:], se.AdminKey[:], se.CreatedAt, se.ExpiresAt)
	return classify(err, "session")
}

// SessionByHash implements auth.SessionStore.
func (s *Store) SessionByHash(ctx context.Context, h auth.Hash) (*auth.Session, error) {
	var admin []byte
	se := &auth.Session{Hash: h}
	err := s.pool.QueryRow(ctx, `SELECT admin_key, created_at, expires_at FROM ui_sessions WHERE hash = $1`, h[:]).
		Scan(&admin, &se.CreatedAt, &se.ExpiresAt)
	if err != nil {
		return nil, classify(err, "session")
	}
	copy(se.AdminKey[:], admin)
	se.CreatedAt, se.ExpiresAt = utc(se.CreatedAt), utc(se.ExpiresAt)
	return se, nil
}

// DeleteSession implements auth.SessionStore.
func (s *Store) DeleteSession(ctx context.Context, h auth.Hash) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM ui_sessions WHERE hash = $1`, h[:])
	return classify(err, "session")
}

// DeleteExpiredSessions implements auth.SessionStore.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM ui_sessions WHERE expires_at < $1`, now)
	return classify(err, "expired sessions")
}
