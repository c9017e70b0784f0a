package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

// AppendAudit implements audit.Store.
func (s *Store) AppendAudit(ctx context.Context, e *audit.Entry) error {
	e.Time = store.Time(e.Time)
	id := s.ids.New(store.AuditPrefix, e.Time)
	_, err := s.pool.Exec(ctx, `INSERT INTO audit_log (id, at, actor, role, method, path, object_type, object_id, status, before, after)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`, id, e.Time, e.Actor, e.Role, e.Method, e.Path, e.ObjectType, e.ObjectID, e.Status,
		rawArg(e.Before), rawArg(e.After))
	if err != nil {
		return classify(unavailable(err), "audit entry")
	}
	e.ID = id
	return nil
}

// CompleteAudit implements audit.Store.
func (s *Store) CompleteAudit(ctx context.Context, e *audit.Entry) error {
	tag, err := s.pool.Exec(ctx, `UPDATE audit_log SET status = $1, object_id = $2, after = $3 WHERE id = $4`,
		e.Status, e.ObjectID, rawArg(e.After), e.ID)
	if err != nil {
		return classify(unavailable(err), "audit entry")
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("audit entry %q: %w", e.ID, auth.ErrNotFound)
	}
	return nil
}

// Audit implements audit.Store.
func (s *Store) Audit(ctx context.Context, q audit.Query) ([]audit.Entry, error) {
	var where []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1))
	}
	if q.After != "" {
		add("id > ?", q.After)
	}
	if !q.Since.IsZero() {
		add("at >= ?", q.Since)
	}
	if !q.Until.IsZero() {
		add("at < ?", q.Until)
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
	limit := q.Limit
	if limit <= 0 || limit > store.MaxAuditPage {
		limit = store.MaxAuditPage
	}
	args = append(args, limit)
	query += " ORDER BY id LIMIT $" + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, classify(err, "audit log")
	}
	defer rows.Close()
	out := []audit.Entry{}
	for rows.Next() {
		var e audit.Entry
		var before, after *string
		if err := rows.Scan(&e.ID, &e.Time, &e.Actor, &e.Role, &e.Method, &e.Path, &e.ObjectType, &e.ObjectID, &e.Status, &before, &after); err != nil {
			return nil, classify(err, "audit log")
		}
		e.Time = utc(e.Time)
		e.Before, e.After = rawOf(before), rawOf(after)
		out = append(out, e)
	}
	return out, classify(rows.Err(), "audit log")
}

func rawArg(r json.RawMessage) *string {
	if len(r) == 0 {
		return nil
	}
	s := string(r)
	return &s
}

func rawOf(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}
