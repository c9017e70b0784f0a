package auth

import (
	"context"
	"errors"
	"strings"
	"time"
)

// The records below are what the admin API manages and the stores keep:
// projects own keys and customers. They carry limits and budgets; the
// limit package enforces them, auth only resolves who is calling.

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodWeek  = "week"
	PeriodMonth = "month"
	PeriodTotal = "total"
)

// Budget caps spend in USD over a period.
type Budget struct {
	USD    float64 `json:"usd"`
	Period string  `json:"period"` // day | week | month | total
}

// Limits are request and token rates; 0 means unlimited.
type Limits struct {
	RPM int `json:"rpm"`
	TPM int `json:"tpm"`
}

// Project groups keys and customers under shared limits and settings.
type Project struct {
	ID     string   `json:"id"`   // "proj_…", assigned by the store
	Name   string   `json:"name"` // unique
	Limits          // project-wide rates, over all its keys
	Budget *Budget  `json:"budget,omitempty"`
	Models []string `json:"models,omitempty"` // allowed models; empty = all
	// Providers are the providers (by their configured name) the
	// project's requests may go to; empty = all.
	Providers []string          `json:"providers,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Cache overrides the config's cache settings for the project; nil
	// follows them.
	Cache *ProjectCache `json:"cache,omitempty"`
	// LogBodies keeps request and response bodies in the request log;
	// off by default (bodies may hold personal data).
	LogBodies bool      `json:"log_bodies"`
	ReadOnly  bool      `json:"read_only"` // defined in the config file, not editable by the API
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ProjectCache is a project's override of the config's cache section.
type ProjectCache struct {
	Exact    ExactCacheOverride    `json:"exact"`
	Semantic SemanticCacheOverride `json:"semantic"`
}

// SemanticCacheOverride overrides cache.semantic for one project; a zero
// field follows the config.
type SemanticCacheOverride struct {
	Enabled   *bool   `json:"enabled"`             // nil: cache.semantic.enabled
	Threshold float64 `json:"threshold,omitempty"` // 0: cache.semantic.threshold
}

// ExactCacheOverride overrides cache.exact for one project; a zero field
// follows the config.
type ExactCacheOverride struct {
	Enabled    *bool `json:"enabled"`               // nil: cache.exact.enabled
	TTLSeconds int   `json:"ttl_seconds,omitempty"` // 0: cache.exact.ttl
}

// IsZero reports whether the override changes nothing.
func (c *ProjectCache) IsZero() bool {
	return c == nil || c.Exact.Enabled == nil && c.Exact.TTLSeconds == 0 &&
		c.Semantic.Enabled == nil && c.Semantic.Threshold == 0
}

// Key is a virtual API key. The secret itself is never stored: only its
// SHA-256 (Hash) and a short, non-secret prefix for people to recognise it.
type Key struct {
	ID        string `json:"id"` // "key_…", assigned by the store; stable across rotation
	Hash      Hash   `json:"-"`
	Prefix    string `json:"prefix"` // e.g. "gh-7Kq2" — enough to tell keys apart, useless to an attacker
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
	Limits
	// ModelLimits are rates per model this key calls, by the model name
	// clients send; they apply on top of the key's own rates.
	ModelLimits map[string]Limits `json:"model_limits,omitempty"`
	Budget      *Budget           `json:"budget,omitempty"`
	Models      []string          `json:"models,omitempty"` // allowed models; empty = the project's
	// Providers are the providers (by their configured name) the key's
	// requests may go to, within the project's; empty = the project's.
	Providers []string          `json:"providers,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	ExpiresAt *time.Time        `json:"expires_at,omitempty"`
	RevokedAt *time.Time        `json:"revoked_at,omitempty"`
	// NoCache bars the key from the response cache: its requests are
	// neither answered from it nor stored (x-gatehouse-cache: bypass).
	NoCache    bool       `json:"no_cache"`
	ReadOnly   bool       `json:"read_only"` // a static key from the config file
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// Active reports whether the key may be used at now.
func (k *Key) Active(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// What a customer over budget gets.
const (
	OnExceedBlock     = "block"
	OnExceedDowngrade = "downgrade"
)

// Customer is an end user of a project's application, named by the
// x-gatehouse-customer header or the request's "user" field.
type Customer struct {
	ID             string            `json:"id"`          // "cus_…", assigned by the store
	ProjectID      string            `json:"project_id"`  //
	ExternalID     string            `json:"external_id"` // the header / user value; unique per project
	Name           string            `json:"name,omitempty"`
	DailyUSD       *float64          `json:"daily_usd,omitempty"`   // budget per UTC day
	MonthlyUSD     *float64          `json:"monthly_usd,omitempty"` // budget per UTC month
	OnExceed       string            `json:"on_exceed"`             // block | downgrade
	DowngradeModel string            `json:"downgrade_model,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
}

// Store errors. Stores wrap them so callers can test with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists") // a unique name or id is taken
	ErrInUse    = errors.New("still in use")   // a record others depend on cannot be removed yet
	// ErrUnavailable: the store could not be reached (the database is
	// down, restarting or refusing connections), so nothing was read or
	// changed; the same call may succeed later.
	ErrUnavailable = errors.New("record store unavailable")
)

// Page asks for one page of a list, ordered by ID. Store IDs begin with
// their creation time, so that order is also (to the millisecond) the
// order of creation, and a page boundary never skips or repeats a record
// however many are created meanwhile.
type Page struct {
	After string // return records with ID > After; "" starts at the beginning
	Limit int    // at most this many; 0 (or less) and anything above MaxPageSize mean MaxPageSize
	// Search, for keys only, keeps the keys KeyMatches; "" keeps all.
	Search string
}

// KeyMatches is the key search of the admin API and the dashboard: the
// name contains search, ignoring ASCII case, or the prefix or the ID
// starts with it. Every store filters the same way (SQL's lower() folds
// ASCII letters alike in SQLite and PostgreSQL for these names).
func KeyMatches(k *Key, search string) bool {
	return strings.Contains(asciiLower(k.Name), asciiLower(search)) ||
		strings.HasPrefix(k.Prefix, search) || strings.HasPrefix(k.ID, search)
}

func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// MaxPageSize bounds one page of any list.
const MaxPageSize = 1000

// Times in records are kept to the microsecond (PostgreSQL's precision) and
// come back from a store in UTC: a store truncates the times it is given
// and those it assigns, and writes the truncated values back into the
// record it was passed, so that record equals what a later read returns.

// IsZero reports whether h is the zero Hash. No secret hashes to it, so a
// KeyChanges channel uses it to mean "changes may have been missed: drop
// every cached key".
func (h Hash) IsZero() bool { return h == Hash{} }

// KeyStore is what auth needs from storage: find a key by its hash on a
// cache miss, hear which cached keys changed, and record when keys were
// last used. Lookups for unknown hashes return ErrNotFound.
type KeyStore interface {
	KeyByHash(ctx context.Context, h Hash) (*Key, *Project, error)
	TouchKeys(ctx context.Context, used map[string]time.Time) error

	// KeyChanges delivers the hash of every key whose record changed
	// (created, updated, rotated — both the old and the new hash —,
	// revoked, or deleted with its project, and every key of a project
	// that was updated, since KeyByHash returns the project too), from
	// this or any other replica sharing the store, until ctx ends, when
	// the channel is closed. Caches drop what it names; a created key's
	// hash lets a negative cache forget a miss. The zero Hash means
	// changes may have been missed (a slow reader fell far behind, or the
	// cluster listener reconnected): drop everything. Sends never block
	// the writer. Embedded stores deliver their own changes at once.
	KeyChanges(ctx context.Context) (<-chan Hash, error)
}

// Store is the full record store the admin API manages. The sqlite and
// postgres packages implement it; the storetest suite holds them to one
// contract.
type Store interface {
	KeyStore

	CreateProject(ctx context.Context, p *Project) error // fills ID, CreatedAt, UpdatedAt
	Project(ctx context.Context, id string) (*Project, error)
	ProjectByName(ctx context.Context, name string) (*Project, error)
	UpdateProject(ctx context.Context, p *Project) error // by ID; fills UpdatedAt
	// DeleteProject removes a project with its customers and its revoked
	// or expired keys; it fails with ErrInUse while the project has an
	// active key, so a delete never silently cuts off live traffic.
	DeleteProject(ctx context.Context, id string) error
	Projects(ctx context.Context, pg Page) ([]Project, error)

	CreateKey(ctx context.Context, k *Key) error // k.Hash set by the caller; fills ID and times
	Key(ctx context.Context, id string) (*Key, error)
	// UpdateKey writes a key's settings by ID (name, limits, budget,
	// models, labels, expiry) and reloads k from the store; the hash,
	// prefix, project, revocation and times are not settings.
	UpdateKey(ctx context.Context, k *Key) error
	RotateKey(ctx context.Context, id string, h Hash, prefix string) error // new secret, same identity
	RevokeKey(ctx context.Context, id string, at time.Time) error          // revoking twice keeps the first time
	Keys(ctx context.Context, projectID string, pg Page) ([]Key, error)    // projectID "" = all

	CreateCustomer(ctx context.Context, c *Customer) error
	Customer(ctx context.Context, id string) (*Customer, error)
	CustomerByExternalID(ctx context.Context, projectID, externalID string) (*Customer, error)
	UpdateCustomer(ctx context.Context, c *Customer) error
	DeleteCustomer(ctx context.Context, id string) error
	Customers(ctx context.Context, projectID string, pg Page) ([]Customer, error) // projectID "" = all

	Close() error
}
