package auth

import "crypto/subtle"

// Role is what an admin credential may do through /admin/ and the
// dashboard.
type Role string

const (
	RoleAdmin  Role = "admin"  // read and change everything
	RoleViewer Role = "viewer" // read only
)

// CanWrite says whether the role may change anything.
func (r Role) CanWrite() bool { return r == RoleAdmin }

// Admin is one admin credential, known by the hash of its key only: the
// key itself is never kept past config loading.
type Admin struct {
	Name string
	Role Role
	Hash Hash // SHA-256 of the key
}

// Admins are the configured admin credentials. The zero value matches
// nothing.
type Admins []Admin

// Match finds the credential whose key hashes to h. Every configured hash
// is compared in constant time and the loop never stops early, so neither
// the time taken nor which comparison failed tells how much of a key was
// right or which credential came close.
func (as Admins) Match(h Hash) (Admin, bool) {
	found := -1
	for i := range as {
		if subtle.ConstantTimeCompare(as[i].Hash[:], h[:]) == 1 && !as[i].Hash.IsZero() {
			found = i
		}
	}
	if found < 0 {
		return Admin{}, false
	}
	return as[found], true
}

// MatchSecret is Match of the secret's hash.
func (as Admins) MatchSecret(secret string) (Admin, bool) {
	return as.Match(HashKey(secret))
}

// Actor names who did something, for the audit log: the credential's
// name, prefixed "session:" when it acted through a dashboard session.
type Actor struct {
	Name    string `json:"name"`
	Role    Role   `json:"role"`
	Session bool   `json:"session,omitempty"`
}

// String is the actor as the audit log shows it: "ops" or "session:ops".
func (a Actor) String() string {
	if a.Session {
		return "session:" + a.Name
	}
	return a.Name
}
