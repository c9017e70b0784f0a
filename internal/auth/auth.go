// Package auth turns the credential a client presents into a Principal:
// which key is calling, for which project, and what it may use. Static
// serves the config file's keys; Keys adds the virtual keys of a store,
// behind an in-process cache so the request path never waits on a
// database for a known key.
//
// Keys are looked up by the SHA-256 of the secret, so neither memory nor
// the stores ever hold a usable secret, and nothing here logs one. auth
// never imports a database driver or a store package; it declares the
// ports (KeyStore, Store) and the stores implement them.
//
// HashMemo spares the request path that SHA-256 for a key seen before:
// it maps a keyed PRF of the secret (SipHash-2-4-128 under a key drawn
// from crypto/rand per process, which never leaves it) to the secret's
// SHA-256. It holds no secret in plaintext; a collision needs the PRF's
// key, and by chance is a 2^-128 event per pair of secrets; only secrets
// that resolved to an active key are put in, so unknown keys cannot fill
// it. Every request still resolves the hash as before, so revocation,
// expiry and rotation are untouched (see HashMemo).
package auth

import (
	"crypto/sha256"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
)

// Authenticator resolves the caller of a request. *Static and *Keys
// implement it; the server takes either.
type Authenticator interface {
	Authenticate(r *http.Request) (*Principal, error)
}

// Principal is the identity a request runs under, with everything later
// stages (limits, budgets, routing, logging) need to know about the key
// and its project, so they never go back to a store. A Principal handed
// out by an Authenticator is shared between requests: never modify it.
type Principal struct {
	KeyID     string // stable identifier, safe to log
	Name      string // the key's name
	Project   string // the project's name
	ProjectID string // "" for a static key, whose project exists only in the config
	// RPM and TPM are the key's own rates; 0 means unlimited.
	RPM int
	TPM int
	// ModelLimits are the key's rates per model (the name the client
	// sends), over and above RPM and TPM; nil means none.
	ModelLimits map[string]Limits
	// Budget is the key's own budget; nil means none.
	Budget *Budget
	// ProjectLimits and ProjectBudget apply to all the project's keys
	// together.
	ProjectLimits Limits
	ProjectBudget *Budget
	// Models is what the key may call: the key's list intersected with
	// its project's when both have one, else whichever has one. nil means
	// any model; a non-nil empty map means none (the two lists share no
	// model).
	Models map[string]bool
	// Providers are the providers (by configured name) the key's
	// requests may go to, resolved like Models: nil means any, a non-nil
	// empty map none.
	Providers map[string]bool
	// Labels are the project's labels overlaid with the key's.
	Labels map[string]string
	// ExpiresAt is when the key stops working; zero means never.
	ExpiresAt time.Time
	// Cache is the project's override of the cache settings (nil:
	// none) and LogBodies its log_bodies; NoCache bars the key itself
	// from the cache.
	Cache     *ProjectCache
	LogBodies bool
	NoCache   bool
	// ReadOnly marks a static key from the config file.
	ReadOnly bool
	// QuotedKeyID is KeyID as a JSON string, and LogMembers KeyID and
	// Project as the members `,"key":…,"project":…` of the request log
	// line (server's logFields), made once with the principal
	// (quoteNames) for the line every request writes: one copy where
	// the two names cost two keys, two quotes and their checks. A
	// principal made or changed without quoteNames has them zero or
	// stale, which the line tells and writes its names afresh.
	QuotedKeyID llm.Quoted
	LogMembers  llm.Members
	// StaticTag is StaticTagPrefix and Project, for a principal whose
	// project exists only in the config (no ProjectID): the hash tag of
	// its limit counters (server.PrincipalTag), made once with the
	// principal rather than concatenated for every admitted request.
	StaticTag string
	// LimitMemo is where the embedded admitter keeps the counters of
	// this key's admissions (limit.Memo), made with the principal so
	// that each admission of the key locks them without listing and
	// looking them up again; nil works (they are looked up). A
	// principal changed after it was made may share it: a plan is used
	// only for admissions with the very rates and budgets it was made
	// from.
	LimitMemo *limit.Memo
	// LineMemo keeps the request log line's members from "stream" to
	// "project" as the key's requests write them (see llm.TextMemo),
	// made with the principal; nil works (they are written member by
	// member).
	LineMemo *llm.TextMemo
	// rates are the key's and its project's rates in decimal, made once
	// with the principal (quoteNames) for the x-ratelimit-limit-*
	// headers every admitted answer carries; see RateText and RateLines.
	rates [4]rateText
}

// rateText is a rate, its decimal form, and the x-ratelimit lines it
// opens for a bucket of requests and of tokens (RateLines).
type rateText struct {
	n     int64
	text  string
	lines [2]string
}

// The x-ratelimit headers' names that open with a rate's text
// (RateLines), in canonical form: the server writes them on every
// admitted answer.
const (
	HeaderLimitRequests     = "X-Ratelimit-Limit-Requests"
	HeaderRemainingRequests = "X-Ratelimit-Remaining-Requests"
	HeaderLimitTokens       = "X-Ratelimit-Limit-Tokens"
	HeaderRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
)

// RateLines returns, when n is one of the principal's rates, the opening
// of the x-ratelimit lines of a bucket with limit n, made once with the
// principal: the limit's line whole and the next line's name,
// "X-Ratelimit-Limit-Requests: 100\r\nX-Ratelimit-Remaining-Requests: "
// (tokens: the Tokens headers). An answer's lines are then one copy
// and the remaining count, where the names and the limit were three.
// "" otherwise, as RateText.
func (p *Principal) RateLines(n int64, tokens bool) string {
	r := p.rate(n)
	switch {
	case r == nil:
		return ""
	case tokens:
		return r.lines[1]
	}
	return r.lines[0]
}

// rate is the kept text of rate n, nil when n is none of the
// principal's rates (or not positive: an unset rate is kept as 0).
func (p *Principal) rate(n int64) *rateText {
	if n <= 0 {
		return nil
	}
	for i := range p.rates {
		if p.rates[i].n == n {
			return &p.rates[i]
		}
	}
	return nil
}

func makeRateText(n int) rateText {
	t := strconv.Itoa(n)
	return rateText{n: int64(n), text: t, lines: [2]string{
		HeaderLimitRequests + ": " + t + "\r\n" + HeaderRemainingRequests + ": ",
		HeaderLimitTokens + ": " + t + "\r\n" + HeaderRemainingTokens + ": ",
	}}
}

// RateText returns n in decimal when it is one of the rates the
// principal was made with (its own or its project's requests or tokens
// per minute), without formatting it again; "" otherwise. The text is
// kept with the value it was made from, so a principal copied and
// changed afterwards never gets another value's text.
func (p *Principal) RateText(n int64) string {
	if r := p.rate(n); r != nil {
		return r.text
	}
	return ""
}

// StaticTagPrefix begins the counters' hash tag of a project that exists
// only in the config, whose name is then all there is to tell it by.
const StaticTagPrefix = "static:"

// The opening texts of the request log line's members LogMembers holds.
const (
	LogKeyMember     = `,"key":`
	LogProjectMember = `,"project":`
)

// quoteNames fills QuotedKeyID, LogMembers, StaticTag, the rates
// RateText returns, and a LimitMemo and a LineMemo of its own.
func (p *Principal) quoteNames() {
	p.QuotedKeyID = llm.Quote(p.KeyID)
	p.LimitMemo = new(limit.Memo)
	p.LineMemo = new(llm.TextMemo)
	p.LogMembers = llm.Members{}
	if p.Project != "" { // the line has no project member then
		p.LogMembers = llm.MakeMembers(LogKeyMember, p.KeyID, LogProjectMember, p.Project)
	}
	for i, n := range [4]int{p.RPM, p.TPM, p.ProjectLimits.RPM, p.ProjectLimits.TPM} {
		p.rates[i] = rateText{}
		if n > 0 {
			p.rates[i] = makeRateText(n)
		}
	}
	if p.ProjectID == "" && p.Project != "" {
		p.StaticTag = StaticTagPrefix + p.Project
	}
}

// Allows reports whether the principal may call model.
func (p *Principal) Allows(model string) bool {
	return p.Models == nil || p.Models[model]
}

// AllowsProvider reports whether the principal's requests may be sent to
// the provider of that configured name.
func (p *Principal) AllowsProvider(name string) bool {
	return p.Providers == nil || p.Providers[name]
}

// Hash is the SHA-256 of a secret key.
type Hash [sha256.Size]byte

// HashKey hashes a secret for lookup.
func HashKey(secret string) Hash {
	// Secrets are short: copying into a stack buffer spares the request
	// path the allocation of the []byte conversion.
	var buf [128]byte
	if len(secret) <= len(buf) {
		return sha256.Sum256(append(buf[:0], secret...))
	}
	return sha256.Sum256([]byte(secret))
}

// Static authenticates against a fixed table of keys (those in the config
// file). It is read-only after construction and safe for concurrent use.
type Static struct {
	keys principalTable
}

// StaticKey is one entry for NewStatic.
type StaticKey struct {
	Secret    string
	Principal Principal
}

// NewStatic builds the table. The secrets are hashed and dropped; the
// principals are copied and marked ReadOnly.
func NewStatic(keys []StaticKey) *Static {
	s := &Static{keys: make(principalTable, len(keys))}
	for _, k := range keys {
		p := k.Principal
		p.ReadOnly = true
		p.quoteNames()
		s.keys.put(HashKey(k.Secret), &p)
	}
	return s
}

// Lookup finds the principal for a secret.
func (s *Static) Lookup(secret string) (*Principal, bool) { return s.LookupHash(HashKey(secret)) }

// LookupHash finds the principal for a secret hashed already (HashKey).
func (s *Static) LookupHash(h Hash) (*Principal, bool) {
	p := s.keys.get(&h)
	return p, p != nil
}

// Credential extracts the client's secret from "Authorization: Bearer …"
// or, as Anthropic clients send it, "x-api-key".
//
// The names are looked up as stored: net/http's servers (HTTP/1 and
// HTTP/2 alike) store every incoming name in canonical form, and
// Header.Get would canonicalise the constant name again on each request.
func Credential(r *http.Request) string {
	if v := first(r.Header[hdrAuthorization]); v != "" {
		// The scheme as the SDKs write it is one compare; any other case
		// of it is folded (RFC 9110 §11.1: the scheme is case-insensitive).
		if len(v) > 7 && (v[:7] == "Bearer " || strings.EqualFold(v[:7], "bearer ")) {
			return trimmed(v[7:])
		}
		return ""
	}
	return first(r.Header[hdrAPIKey])
}

// trimmed is strings.TrimSpace(s), told at the ends' two bytes for a
// secret as clients send it, with no white space around it: a byte
// above ' ' and below utf8.RuneSelf is neither ASCII white space nor
// part of a Unicode one (whose every byte is utf8.RuneSelf or more), so
// TrimSpace would return s whole.
func trimmed(s string) string {
	if len(s) > 0 && plainByte(s[0]) && plainByte(s[len(s)-1]) {
		return s
	}
	return strings.TrimSpace(s)
}

func plainByte(c byte) bool { return c > ' ' && c < utf8.RuneSelf }

// The credential headers' names in canonical form.
const (
	hdrAuthorization = "Authorization"
	hdrAPIKey        = "X-Api-Key"
)

// first is what Header.Get returns for a name's values.
func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
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
