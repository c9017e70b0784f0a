package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

const keyCols = `k.id, k.hash, k.prefix, k.project_id, k.name, k.rpm, k.tpm, k.budget_usd, k.budget_period, k.models, k.labels,
	k.expires_at, k.revoked_at, k.read_only, k.created_at, k.updated_at, k.last_used_at, k.model_limits, k.no_cache, k.providers`

const keyByHashSQL = `SELECT ` + keyCols + `, ` + projectColsP + ` FROM keys k JOIN projects p ON p.id = k.project_id WHERE k.hash = ?`

// projectColsP is projectCols qualified for the join in KeyByHash.
const projectColsP = `p.id, p.name, p.rpm, p.tpm, p.budget_usd, p.budget_period, p.models, p.labels, p.cache, p.cache_ttl,
	p.semantic, p.semantic_threshold, p.log_bodies, p.read_only, p.created_at, p.updated_at, p.providers`

// keyDest collects one key row; scanning through it lets KeyByHash read
// the key and its project from one joined row.
type keyDest struct {
	k                                auth.Key
	hash                             []byte
	usd                              sql.NullFloat64
	period                           sql.NullString
	models, labels, created, updated string
	modelLimits, providers           string
	expires, revoked, lastUsed       sql.NullString
}

func (d *keyDest) ptrs() []any {
	return []any{&d.k.ID, &d.hash, &d.k.Prefix, &d.k.ProjectID, &d.k.Name, &d.k.RPM, &d.k.TPM, &d.usd, &d.period,
		&d.models, &d.labels, &d.expires, &d.revoked, &d.k.ReadOnly, &d.created, &d.updated, &d.lastUsed, &d.modelLimits,
		&d.k.NoCache, &d.providers}
}

func (d *keyDest) key() (*auth.Key, error) {
	k := d.k
	if len(d.hash) != len(k.Hash) {
		return nil, fmt.Errorf("key %s: corrupt row: hash is %d bytes", k.ID, len(d.hash))
	}
	k.Hash = auth.Hash(d.hash)
	k.Budget = scanBudget(d.usd, d.period)
	var errs [9]error
	k.Models, errs[0] = store.ParseList(d.models)
	k.Labels, errs[1] = store.ParseMap(d.labels)
	k.CreatedAt, errs[2] = parseTime(d.created)
	k.UpdatedAt, errs[3] = parseTime(d.updated)
	k.ExpiresAt, errs[4] = parseTimePtr(d.expires)
	k.RevokedAt, errs[5] = parseTimePtr(d.revoked)
	k.LastUsedAt, errs[6] = parseTimePtr(d.lastUsed)
	k.ModelLimits, errs[7] = store.ParseModelLimits(d.modelLimits)
	k.Providers, errs[8] = store.ParseList(d.providers)
	if err := firstErr(errs[:]...); err != nil {
		return nil, fmt.Errorf("key %s: corrupt row: %w", k.ID, err)
	}
	return &k, nil
}

func scanKey(row scanner) (*auth.Key, error) {
	var d keyDest
	if err := row.Scan(d.ptrs()...); err != nil {
		return nil, err
	}
	return d.key()
}

// KeyByHash returns the key with hash h and its project, revoked and
// expired keys included (the caller decides with Key.Active, and may
// cache the answer).
func (s *Store) KeyByHash(ctx context.Context, h auth.Hash) (*auth.Key, *auth.Project, error) {
	var kd keyDest
	var pd projectDest
	if err := s.keyByHash.QueryRowContext(ctx, h[:]).Scan(append(kd.ptrs(), pd.ptrs()...)...); err != nil {
		return nil, nil, classify(err, "key")
	}
	k, err := kd.key()
	if err != nil {
		return nil, nil, err
	}
	p, err := pd.project()
	if err != nil {
		return nil, nil, err
	}
	return k, p, nil
}

// TouchKeys records last-used times in one transaction; a time earlier
// than the stored one is ignored (batches from replicas may arrive out of
// order) and so is an ID that no longer exists. It is not a change of the
// key's record: nothing is announced on KeyChanges.
func (s *Store) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `UPDATE keys SET last_used_at = ?1
			WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at < ?1)`)
		if err != nil {
			return fmt.Errorf("sqlite: touch keys: %w", err)
		}
		defer stmt.Close()
		for id, at := range used {
			if _, err := stmt.ExecContext(ctx, fmtTime(at), id); err != nil {
				return fmt.Errorf("sqlite: touch key %q: %w", id, err)
			}
		}
		return nil
	})
}

// CreateKey inserts k (its Hash set by the caller), filling ID and times.
func (s *Store) CreateKey(ctx context.Context, k *auth.Key) error {
	now := store.Now()
	id := s.ids.New(store.KeyPrefix, now)
	store.NormKey(k)
	usd, period := budgetArgs(k.Budget)
	_, err := s.w.ExecContext(ctx, `INSERT INTO keys (id, hash, prefix, project_id, name, rpm, tpm, budget_usd, budget_period,
		models, labels, expires_at, revoked_at, read_only, created_at, updated_at, last_used_at, model_limits, no_cache, providers)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		id, k.Hash[:], k.Prefix, k.ProjectID, k.Name, k.RPM, k.TPM, usd, period, store.JSONList(k.Models), store.JSONMap(k.Labels),
		fmtTimePtr(k.ExpiresAt), fmtTimePtr(k.RevokedAt), k.ReadOnly, fmtTime(now), fmtTime(now), fmtTimePtr(k.LastUsedAt),
		store.JSONModelLimits(k.ModelLimits), k.NoCache, store.JSONList(k.Providers))
	if err != nil {
		return classify(err, fmt.Sprintf("key %q in project %q", k.Name, k.ProjectID))
	}
	k.ID, k.CreatedAt, k.UpdatedAt = id, now, now
	s.hub.Publish(k.Hash)
	return nil
}

// Key returns the key with the given ID.
func (s *Store) Key(ctx context.Context, id string) (*auth.Key, error) {
	k, err := scanKey(s.r.QueryRowContext(ctx, `SELECT `+keyCols+` FROM keys k WHERE k.id = ?`, id))
	if err != nil {
		return nil, classify(err, fmt.Sprintf("key %q", id))
	}
	return k, nil
}

// UpdateKey writes the key's settings and reloads k.
func (s *Store) UpdateKey(ctx context.Context, k *auth.Key) error {
	store.NormKey(k)
	usd, period := budgetArgs(k.Budget)
	var got *auth.Key
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE keys SET name=?, rpm=?, tpm=?, budget_usd=?, budget_period=?, models=?, labels=?,
			expires_at=?, model_limits=?, no_cache=?, providers=?, updated_at=? WHERE id=?`,
			k.Name, k.RPM, k.TPM, usd, period, store.JSONList(k.Models), store.JSONMap(k.Labels), fmtTimePtr(k.ExpiresAt),
			store.JSONModelLimits(k.ModelLimits), k.NoCache, store.JSONList(k.Providers), fmtTime(store.Now()), k.ID)
		if err != nil {
			return classify(err, fmt.Sprintf("key %q", k.ID))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("key %q: %w", k.ID, auth.ErrNotFound)
		}
		got, err = scanKey(tx.QueryRowContext(ctx, `SELECT `+keyCols+` FROM keys k WHERE k.id = ?`, k.ID))
		if err != nil {
			return classify(err, fmt.Sprintf("key %q", k.ID))
		}
		return nil
	})
	if err != nil {
		return err
	}
	*k = *got
	s.hub.Publish(k.Hash)
	return nil
}

// RotateKey gives the key a new secret (its hash and prefix); ID, settings
// and usage stay. Both the old and the new hash are announced.
func (s *Store) RotateKey(ctx context.Context, id string, h auth.Hash, prefix string) error {
	var old []byte
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT hash FROM keys WHERE id = ?`, id).Scan(&old); err != nil {
			return classify(err, fmt.Sprintf("key %q", id))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE keys SET hash=?, prefix=?, updated_at=? WHERE id=?`,
			h[:], prefix, fmtTime(store.Now()), id); err != nil {
			return classify(err, fmt.Sprintf("key %q: new hash", id))
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.hub.Publish(auth.Hash(old), h)
	return nil
}

// RevokeKey marks the key revoked at at; revoking again keeps the first
// time but still announces the key, so a cache that somehow kept it drops it.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) error {
	var hash []byte
	err := s.tx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `UPDATE keys SET revoked_at = coalesce(revoked_at, ?), updated_at = ? WHERE id = ? RETURNING hash`,
			fmtTime(at), fmtTime(store.Now()), id).Scan(&hash)
		return classify(err, fmt.Sprintf("key %q", id))
	})
	if err != nil {
		return err
	}
	s.hub.Publish(auth.Hash(hash))
	return nil
}

// Keys lists keys in ID order, of one project or ("") of all.
func (s *Store) Keys(ctx context.Context, projectID string, pg auth.Page) ([]auth.Key, error) {
	q := `SELECT ` + keyCols + ` FROM keys k WHERE k.id > ?`
	args := []any{pg.After}
	if projectID != "" {
		q += ` AND k.project_id = ?`
		args = append(args, projectID)
	}
	if pg.Search != "" {
		// auth.KeyMatches; SQLite's lower() folds ASCII letters only, as
		// KeyMatches does.
		q += ` AND (instr(lower(k.name), lower(?)) > 0 OR substr(k.prefix, 1, length(?)) = ? OR substr(k.id, 1, length(?)) = ?)`
		args = append(args, pg.Search, pg.Search, pg.Search, pg.Search, pg.Search)
	}
	q += ` ORDER BY k.id LIMIT ?`
	args = append(args, store.PageLimit(pg))
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: keys: %w", err)
	}
	defer rows.Close()
	var out []auth.Key
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: keys: %w", err)
		}
		out = append(out, *k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: keys: %w", err)
	}
	return out, nil
}
