package postgres

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

const keyCols = `k.id, k.hash, k.prefix, k.project_id, k.name, k.rpm, k.tpm, k.budget_usd, k.budget_period, k.models::text,
	k.labels::text, k.expires_at, k.revoked_at, k.read_only, k.created_at, k.updated_at, k.last_used_at, k.model_limits::text,
	k.no_cache, k.providers::text`

const projectColsP = `p.id, p.name, p.rpm, p.tpm, p.budget_usd, p.budget_period, p.models::text, p.labels::text, p.cache,
	p.cache_ttl, p.semantic, p.semantic_threshold, p.log_bodies, p.read_only, p.created_at, p.updated_at, p.providers::text`

// keyDest collects one key row (see projectDest).
type keyDest struct {
	k              auth.Key
	hash           []byte
	usd            *float64
	period         *string
	models, labels string
	modelLimits    string
	providers      string
}

func (d *keyDest) ptrs() []any {
	return []any{&d.k.ID, &d.hash, &d.k.Prefix, &d.k.ProjectID, &d.k.Name, &d.k.RPM, &d.k.TPM, &d.usd, &d.period,
		&d.models, &d.labels, &d.k.ExpiresAt, &d.k.RevokedAt, &d.k.ReadOnly, &d.k.CreatedAt, &d.k.UpdatedAt, &d.k.LastUsedAt, &d.modelLimits,
		&d.k.NoCache, &d.providers}
}

func (d *keyDest) key() (*auth.Key, error) {
	k := d.k
	if len(d.hash) != len(k.Hash) {
		return nil, fmt.Errorf("key %s: corrupt row: hash is %d bytes", k.ID, len(d.hash))
	}
	k.Hash = auth.Hash(d.hash)
	k.Budget = scanBudget(d.usd, d.period)
	k.CreatedAt, k.UpdatedAt = utc(k.CreatedAt), utc(k.UpdatedAt)
	k.ExpiresAt, k.RevokedAt, k.LastUsedAt = utcPtr(k.ExpiresAt), utcPtr(k.RevokedAt), utcPtr(k.LastUsedAt)
	var errs [4]error
	k.Models, errs[0] = store.ParseList(d.models)
	k.Labels, errs[1] = store.ParseMap(d.labels)
	k.ModelLimits, errs[2] = store.ParseModelLimits(d.modelLimits)
	k.Providers, errs[3] = store.ParseList(d.providers)
	if err := firstErr(errs[:]...); err != nil {
		return nil, fmt.Errorf("key %s: corrupt row: %w", k.ID, err)
	}
	return &k, nil
}

func scanKey(row pgx.Row) (*auth.Key, error) {
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
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT `+keyCols+`, `+projectColsP+` FROM keys k JOIN projects p ON p.id = k.project_id
			WHERE k.hash = $1`, h[:]).Scan(append(kd.ptrs(), pd.ptrs()...)...)
	})
	if err != nil {
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

// TouchKeys records last-used times in one statement (so one transaction
// and one round trip); a time earlier than the stored one is ignored
// (batches from replicas may arrive out of order), and so is an ID that no
// longer exists. It is not a change of the key's record: nothing is
// announced on KeyChanges.
func (s *Store) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	ids := make([]string, 0, len(used))
	ats := make([]time.Time, 0, len(used))
	for id, at := range used {
		ids = append(ids, id)
		ats = append(ats, store.Time(at))
	}
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `UPDATE keys k SET last_used_at = u.at
			FROM unnest($1::text[], $2::timestamptz[]) AS u(id, at)
			WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`, ids, ats)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: touch keys: %w", err)
	}
	return nil
}

// CreateKey inserts k (its Hash set by the caller), filling ID and times.
func (s *Store) CreateKey(ctx context.Context, k *auth.Key) error {
	now := store.Now()
	id := s.ids.New(store.KeyPrefix, now)
	store.NormKey(k)
	usd, period := budgetArgs(k.Budget)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO keys (id, hash, prefix, project_id, name, rpm, tpm, budget_usd, budget_period,
			models, labels, expires_at, revoked_at, read_only, created_at, updated_at, last_used_at, model_limits, no_cache, providers)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10::jsonb,$11::jsonb,$12,$13,$14,$15,$15,$16,$17::jsonb,$18,$19::jsonb)`,
			id, k.Hash[:], k.Prefix, k.ProjectID, k.Name, k.RPM, k.TPM, usd, period, store.JSONList(k.Models),
			store.JSONMap(k.Labels), k.ExpiresAt, k.RevokedAt, k.ReadOnly, now, k.LastUsedAt, store.JSONModelLimits(k.ModelLimits),
			k.NoCache, store.JSONList(k.Providers))
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, k.Hash)
	})
	if err != nil {
		return classify(err, fmt.Sprintf("key %q in project %q", k.Name, k.ProjectID))
	}
	k.ID, k.CreatedAt, k.UpdatedAt = id, now, now
	return nil
}

// Key returns the key with the given ID.
func (s *Store) Key(ctx context.Context, id string) (*auth.Key, error) {
	var k *auth.Key
	err := s.withConn(ctx, func(c *pgx.Conn) (err error) {
		k, err = scanKey(c.QueryRow(ctx, `SELECT `+keyCols+` FROM keys k WHERE k.id = $1`, id))
		return err
	})
	if err != nil {
		return nil, classify(err, fmt.Sprintf("key %q", id))
	}
	return k, nil
}

// UpdateKey writes the key's settings, reloads k and announces its hash.
func (s *Store) UpdateKey(ctx context.Context, k *auth.Key) error {
	store.NormKey(k)
	usd, period := budgetArgs(k.Budget)
	var got *auth.Key
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		got, err = scanKey(tx.QueryRow(ctx, `UPDATE keys k SET name=$1, rpm=$2, tpm=$3, budget_usd=$4, budget_period=$5,
			models=$6::jsonb, labels=$7::jsonb, expires_at=$8, updated_at=$9, model_limits=$11::jsonb, no_cache=$12,
			providers=$13::jsonb WHERE id=$10 RETURNING `+keyCols,
			k.Name, k.RPM, k.TPM, usd, period, store.JSONList(k.Models), store.JSONMap(k.Labels), k.ExpiresAt,
			store.Now(), k.ID, store.JSONModelLimits(k.ModelLimits), k.NoCache, store.JSONList(k.Providers)))
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, got.Hash)
	})
	if err != nil {
		return classify(err, fmt.Sprintf("key %q", k.ID))
	}
	*k = *got
	return nil
}

// RotateKey gives the key a new secret (its hash and prefix); ID, settings
// and usage stay. Both the old and the new hash are announced.
func (s *Store) RotateKey(ctx context.Context, id string, h auth.Hash, prefix string) error {
	return classify(s.tx(ctx, func(tx pgx.Tx) error {
		var old []byte
		// FOR UPDATE: two rotations of one key must not both announce
		// the same "old" hash and lose the one in between.
		if err := tx.QueryRow(ctx, `SELECT hash FROM keys WHERE id = $1 FOR UPDATE`, id).Scan(&old); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE keys SET hash=$1, prefix=$2, updated_at=$3 WHERE id=$4`,
			h[:], prefix, store.Now(), id); err != nil {
			return err
		}
		return s.notify(ctx, tx, auth.Hash(old), h)
	}), fmt.Sprintf("key %q", id))
}

// RevokeKey marks the key revoked at at; revoking again keeps the first
// time but still announces the key.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) error {
	return classify(s.tx(ctx, func(tx pgx.Tx) error {
		var hash []byte
		err := tx.QueryRow(ctx, `UPDATE keys SET revoked_at = coalesce(revoked_at, $1), updated_at = $2 WHERE id = $3 RETURNING hash`,
			store.Time(at), store.Now(), id).Scan(&hash)
		if err != nil {
			return err
		}
		return s.notify(ctx, tx, auth.Hash(hash))
	}), fmt.Sprintf("key %q", id))
}

// Keys lists keys in ID order, of one project or ("") of all.
func (s *Store) Keys(ctx context.Context, projectID string, pg auth.Page) ([]auth.Key, error) {
	q := `SELECT ` + keyCols + ` FROM keys k WHERE k.id > $1`
	args := []any{pg.After, store.PageLimit(pg)}
	if projectID != "" {
		args = append(args, projectID)
		q += ` AND k.project_id = $` + strconv.Itoa(len(args))
	}
	if pg.Search != "" {
		// auth.KeyMatches: ASCII case folded by translate, not lower(),
		// which would fold other letters too under a UTF-8 collation.
		args = append(args, pg.Search)
		n := `$` + strconv.Itoa(len(args))
		q += ` AND (strpos(translate(k.name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'),
			translate(` + n + `, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')) > 0
			OR starts_with(k.prefix, ` + n + `) OR starts_with(k.id, ` + n + `))`
	}
	q += ` ORDER BY k.id LIMIT $2`
	var out []auth.Key
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			k, err := scanKey(rows)
			if err != nil {
				return err
			}
			out = append(out, *k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: keys: %w", err)
	}
	return out, nil
}
