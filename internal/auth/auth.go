// Package auth turns the credential a client presents into a Principal:
// which key is calling, for which project, and what it may use.
//
// Keys are looked up by the SHA-256 of the secret, so the table in memory
// (and, later, in stores) never holds a usable secret. auth never imports
// a database driver or a store package; stores implement its ports.
package auth

import (
	"crypto/sha256"
	"net/http"
	"strings"

	"gatehouse/internal/llm"
)

// Principal is the identity a request runs under.
type Principal struct {
	KeyID   string // stable identifier, safe to log
	Name    string
	Project string
	RPM     int
	TPM     int
	Models  map[string]bool // allowed models; empty = all
}

// Allows reports whether the principal may call model.
func (p *Principal) Allows(model string) bool {
	return len(p.Models) == 0 || p.Models[model]
}

// Hash is the SHA-256 of a secret key.
type Hash [sha256.Size]byte

// HashKey hashes a secret for lookup.
func HashKey(secret string) Hash { return sha256.Sum256([]byte(secret)) }

// Static authenticates against a fixed table of keys (those in the config
// file). It is read-only after construction and safe for concurrent use.
type Static struct {
	keys map[Hash]*Principal
}

// StaticKey is one entry for NewStatic.
type StaticKey struct {
	Secret    string
	Principal Principal
}

// NewStatic builds the table. The secrets are hashed and dropped.
func NewStatic(keys []StaticKey) *Static {
	s := &Static{keys: make(map[Hash]*Principal, len(keys))}
	for _, k := range keys {
		p := k.Principal
		s.keys[HashKey(k.Secret)] = &p
	}
	return s
}

// Lookup finds the principal for a secret.
func (s *Static) Lookup(secret string) (*Principal, bool) {
	p, ok := s.keys[HashKey(secret)]
	return p, ok
}

// Credential extracts the client's secret from "Authorization: Bearer …"
// or, as Anthropic clients send it, "x-api-key".
func Credential(r *http.Request) string {
	if v := r.Header.Get("Authorization"); v != "" {
		if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
			return strings.TrimSpace(v[7:])
		}
		return ""
	}
	return r.Header.Get("X-Api-Key")
}

// ErrMissingKey and ErrBadKey are the 401s a client gets; their messages
// never echo the presented secret.
var (
	ErrMissingKey = &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "invalid_request_error",
		Code: "missing_api_key", Message: "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'."}
	ErrBadKey = &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "invalid_request_error",
		Code: "invalid_api_key", Message: "Incorrect API key provided."}
)

// Authenticate resolves the request's credential against s.
func (s *Static) Authenticate(r *http.Request) (*Principal, error) {
	secret := Credential(r)
	if secret == "" {
		return nil, ErrMissingKey
	}
	p, ok := s.Lookup(secret)
	if !ok {
		return nil, ErrBadKey
	}
	return p, nil
}
