// Package audit is the record of changes made through the admin API: who
// (which admin credential, directly or through a dashboard session), what
// (method, path, object type and ID), when, and the object before and
// after, with every secret masked before it is stored.
//
// audit owns the Entry and Query types and the Store port; the record
// stores (SQLite, PostgreSQL) implement it and the admin API writes and
// reads through it. It imports no other gatehouse package and no driver.
package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Entry is one change. Before and After are JSON objects as the admin API
// shows them, masked (see Mask); Before is absent for a creation, After
// for a change that leaves nothing to show.
type Entry struct {
	ID         string    `json:"id"` // "aud_…", assigned by the store; sorts in creation order
	Time       time.Time `json:"time"`
	Actor      string    `json:"actor"` // credential name, or "session:<name>" through the dashboard
	Role       string    `json:"role"`  // the credential's role when it acted
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	ObjectType string    `json:"object_type"` // project | key | customer | price | cache
	ObjectID   string    `json:"object_id,omitempty"`
	// Status is the HTTP status the change was answered with; 0 while it
	// is under way, and for good when the gateway could not record its
	// end (the change may or may not have been made).
	Status int             `json:"status"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// Query selects entries, oldest first. Zero fields select everything.
type Query struct {
	Since, Until time.Time // Since ≤ Time < Until
	ObjectType   string
	Actor        string
	After        string // entries with ID > After
	Limit        int    // at most this many; the store may cap it
}

// Store keeps the audit log where every replica writes and reads it.
type Store interface {
	// AppendAudit stores e, filling its ID; e's Time is kept as given
	// (to the microsecond).
	AppendAudit(ctx context.Context, e *Entry) error
	// CompleteAudit records how the change of an entry appended before
	// it was made ended: e's Status, ObjectID and After replace the
	// stored ones of the entry with e's ID.
	CompleteAudit(ctx context.Context, e *Entry) error
	// Audit lists the entries q selects in ID order.
	Audit(ctx context.Context, q Query) ([]Entry, error)
}

// Masked is what a secret's value becomes.
const Masked = "[redacted]"

// secretMembers are the JSON member names whose values are secrets
// wherever they appear: the key returned once on create and rotate, and
// anything a future record might carry under a credential's usual name.
func secretMembers() []string {
	return []string{"key", "secret", "api_key", "admin_key", "hash", "key_hash", "password", "token", "authorization", "headers"}
}

func isSecretMember(name string) bool {
	name = strings.ToLower(name)
	for _, s := range secretMembers() {
		if name == s {
			return true
		}
	}
	return false
}

// Mask returns v as JSON with the value of every secret member replaced
// by Masked, at any depth; a non-empty string anywhere that equals one of
// extra (secrets the caller knows of, such as a key just issued) is
// masked too. It never fails: what cannot be encoded becomes null.
func Mask(v any, extra ...string) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	var tree any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // keep money and counts exactly as written
	if err := d.Decode(&tree); err != nil {
		return json.RawMessage("null")
	}
	out, err := json.Marshal(mask(tree, extra))
	if err != nil {
		return json.RawMessage("null")
	}
	return out
}

func mask(v any, extra []string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if isSecretMember(k) && x != nil && x != "" {
				t[k] = Masked
				continue
			}
			t[k] = mask(x, extra)
		}
	case []any:
		for i := range t {
			t[i] = mask(t[i], extra)
		}
	case string:
		for _, s := range extra {
			if s != "" && strings.Contains(t, s) {
				return Masked
			}
		}
	}
	return v
}
