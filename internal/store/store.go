// Package store holds what the record stores under it share: record IDs,
// page and time normalisation, numbered migration files, and the
// in-process fan-out of key changes. The backends themselves live in
// sqlite/ (embedded mode) and postgres/ (cluster mode), and storetest/
// holds them both to one contract.
//
// Request-path packages (auth, limit, cache, route, stream) never import
// this tree: they declare ports and the backends implement them.
package store

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"sync"
	"time"

	"gatehouse/internal/auth"
)

// ID prefixes, so an ID says what it names wherever it is pasted.
const (
	ProjectPrefix  = "proj_"
	KeyPrefix      = "key_"
	CustomerPrefix = "cus_"
	AuditPrefix    = "aud_"
)

// idEncoding is lower-case base32hex without padding: its alphabet
// (0-9, a-v) is in ASCII order, so IDs sort as their bytes do.
var idEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// IDs makes record IDs: prefix followed by 26 characters, 48 bits of the
// creation time in milliseconds, then 80 bits from crypto/rand. The time
// comes first so that listing by ID (which pagination needs to be stable)
// also lists in creation order; the random part keeps IDs unguessable and
// unique across replicas without coordination. Within one IDs, an ID made
// later sorts after every earlier one even in the same millisecond (the
// first 16 random bits then count up), so a store lists what one process
// created in the order it created it. The zero value is ready; each
// store keeps one.
type IDs struct {
	mu   sync.Mutex
	last uint64 // the first 8 bytes of the latest ID
}

// New returns a new ID with prefix, made at now.
func (g *IDs) New(prefix string, now time.Time) string {
	var b [16]byte
	rand.Read(b[6:]) // never fails (crypto/rand panics rather than return short)
	hi := uint64(now.UnixMilli())<<16 | uint64(binary.BigEndian.Uint16(b[6:8]))
	g.mu.Lock()
	if hi <= g.last {
		hi = g.last + 1
	}
	g.last = hi
	g.mu.Unlock()
	binary.BigEndian.PutUint64(b[:8], hi)
	return prefix + idEncoding.EncodeToString(b[:])
}

// MaxAuditPage caps a page of the audit log, as auth.MaxPageSize caps
// the records'.
const MaxAuditPage = 1000

// PageLimit is the number of records a page returns: MaxPageSize when
// the caller asked for nothing or too much.
func PageLimit(pg auth.Page) int {
	if pg.Limit <= 0 || pg.Limit > auth.MaxPageSize {
		return auth.MaxPageSize
	}
	return pg.Limit
}

// Time is t as the stores keep it: UTC, to the microsecond (PostgreSQL's
// precision, adopted by SQLite too so both backends round-trip alike).
func Time(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// TimePtr is Time for optional times; nil stays nil.
func TimePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

// Now is the current time as the stores keep it.
func Now() time.Time { return Time(time.Now()) }
