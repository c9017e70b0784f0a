package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

// AppendAudit implements audit.Store.
func (s *Store) AppendAudit(ctx context.Context, e *audit.Entry) error {
	e.Time = store.Time(e.Time)
	id := s.ids.New(store.AuditPrefix, e.Time)
	_, err := s.w.ExecContext(ctx, `INSERT INTO audit_log (id, at, actor, role, method, path, object_type, object_id, status, before, after)
		VALUES (?,?,?,?,?,?,?,?,?,?,?)`, id, unixMicros(e.Time), e.Actor, e.Role, e.Method, e.Path, e.ObjectType, e.ObjectID, e.Status,
		rawArg(e.Before), rawArg(e.After))
	if err != nil {
		return classify(err, "audit entry")
	}
	e.ID = id
	return nil
}

// CompleteAudit implements audit.Store.
func (s *Store) CompleteAudit(ctx context.Context, e *audit.Entry) error {
	res, err := s.w.ExecContext(ctx, `UPDATE audit_log SET status = ?, object_id = ?, after = ? WHERE id = ?`,
		e.Status, e.ObjectID, rawArg(e.After), e.ID)
	if err != nil {
		return classify(err, "audit entry")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("audit entry %q: %w", e.ID, auth.ErrNotFound)
	}
	return nil
}

// Audit implements audit.Store.
func (s *Store) Audit(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		where = append(where, cond)
		args = append(args, arg)
	}
	if q.After != "" {
		add("id > ?", q.After)
	}
	if !q.Since.IsZero() {
		add("at >= ?", unixMicros(q.Since))
	}
	if !q.Until.IsZero() {
		add("at < ?", unixMicros(q.Until))
	}
	if q.ObjectType != "" {
		add("object_type = ?", q.ObjectType)
	}
	if q.Actor != "" {
		add("actor = ?", q.Actor)
	}
	query := `SELECT id, at, actor, role, method, path, object_type, object_id, status, before, after FROM audit_log`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id LIMIT ?"
	args = append(args, auditLimit(q.Limit))
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, classify(err, "audit log")
	}
	defer rows.Close()
	out := []audit.Entry{}
	for rows.Next() {
		var e audit.Entry
		var at int64
		var before, after sql.NullString
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Role, &e.Method, &e.Path, &e.ObjectType, &e.ObjectID, &e.Status, &before, &after); err != nil {
			return nil, classify(err, "audit log")
		}
		e.Time = time.UnixMicro(at).UTC()
		e.Before, e.After = rawOf(before), rawOf(after)
		out = append(out, e)
	}
	return out, classify(rows.Err(), "audit log")
}

// auditLimit is q.Limit capped as every page is.
func auditLimit(n int) int {
	if n <= 0 || n > store.MaxAuditPage {
		return store.MaxAuditPage
	}
	return n
}

func rawArg(r json.RawMessage) any {
	if len(r) == 0 {
		return nil
	}
	return string(r)
}

func rawOf(s sql.NullString) json.RawMessage {
	if !s.Valid {
		return nil
	}
	return json.RawMessage(s.String)
}
