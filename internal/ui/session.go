package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

// CookieName is the session cookie. Its path is / so that the browser
// sends it to /admin/ as well, where it stands in for the admin key.
const CookieName = "gatehouse_session"

// CSRFHeader carries the session's CSRF token on every call that changes
// something. A page of another site can make the browser send the cookie
// (SameSite=Strict aside) but can neither read the token nor set the header
// without a preflight the gateway never answers.
const CSRFHeader = "X-CSRF-Token"

// maxLoginBody bounds a login request: an admin key in a JSON object.
const maxLoginBody = 4096

// DefaultTTL is how long a session lasts when the config does not say.
const DefaultTTL = 12 * time.Hour

// sessionInfo is what the login and session endpoints answer: the page
// needs the CSRF token (it cannot read the HttpOnly cookie) and when the
// session ends.
type sessionInfo struct {
	LoggedIn  bool       `json:"logged_in"`
	CSRFToken string     `json:"csrf_token,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Name and Role are the admin credential's the session acts with:
	// the page hides what a viewer may not do.
	Name string    `json:"name,omitempty"`
	Role auth.Role `json:"role,omitempty"`
}

// newSecret returns a session secret: 32 random bytes, URL-safe.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// csrfToken derives the CSRF token from the session's secret, so it needs
// no storage of its own and ends with the session.
func csrfToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("gatehouse csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// fingerprint ties sessions to the admin credential they were opened with
// without storing anything the key could be recovered or tested from
// faster than by its own hash.
func fingerprint(adminKey auth.Hash) auth.Hash {
	return sha256.Sum256(append([]byte("gatehouse ui session\x00"), adminKey[:]...))
}

var (
	errNoAdminKey = &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "authentication_error",
		Code: "admin_disabled", Message: "The gateway has no admin key: set admin_key in the config to use the dashboard."}
	errBadAdminKey = &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "authentication_error",
		Code: "invalid_admin_key", Message: "Incorrect admin key provided."}
	errNoSession = &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "authentication_error",
		Code: "no_session", Message: "Not logged in: log in to the dashboard with the admin key."}
	errSessionEnded = &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "authentication_error",
		Code: "session_expired", Message: "The dashboard session has ended (expired, logged out, or the admin key changed): log in again."}
	errCSRF = &llm.Error{Kind: llm.KindPermission, Status: http.StatusForbidden, Type: "permission_error",
		Code: "invalid_csrf_token", Message: "A change made with the dashboard's session needs its CSRF token in the " + CSRFHeader + " header."}
	errCrossSite = &llm.Error{Kind: llm.KindPermission, Status: http.StatusForbidden, Type: "permission_error",
		Code: "cross_site_request", Message: "Cross-site requests may not use the dashboard's session."}
	errLoginTooLarge = &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
		Code: "request_too_large", Message: "A login body is a small JSON object: {\"admin_key\": \"…\"}, at most 4 KiB."}
	errMissingKey = &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusBadRequest, Type: "invalid_request_error",
		Param: "admin_key", Code: "missing_admin_key", Message: `Send the admin key as {"admin_key": "…"}.`}
)

// live is a session found by its cookie, with the credential it acts as.
type live struct {
	*auth.Session
	secret string // the cookie's
	admin  auth.Admin
}

func (l *live) actor() *auth.Actor {
	return &auth.Actor{Name: l.admin.Name, Role: l.admin.Role, Session: true}
}

func (l *live) info() sessionInfo {
	return sessionInfo{LoggedIn: true, CSRFToken: csrfToken(l.secret), ExpiresAt: &l.ExpiresAt, Name: l.admin.Name, Role: l.admin.Role}
}

// sessionOf returns the live session r's cookie names. No cookie: nil,
// nil. A cookie naming no live session, or one opened with a credential
// the config no longer has: errSessionEnded.
func (h *Handler) sessionOf(r *http.Request) (*live, *llm.Error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	se, err := h.o.Sessions.SessionByHash(r.Context(), auth.HashKey(c.Value))
	switch {
	case errors.Is(err, auth.ErrNotFound):
		return nil, errSessionEnded
	case err != nil:
		return nil, h.internal(r, err)
	}
	if !h.o.Now().Before(se.ExpiresAt) {
		return nil, errSessionEnded
	}
	a, ok := h.credentialOf(se.AdminKey)
	if !ok {
		return nil, errSessionEnded
	}
	return &live{Session: se, secret: c.Value, admin: a}, nil
}

// credentialOf finds the credential whose fingerprint a session carries,
// comparing with every one in constant time.
func (h *Handler) credentialOf(fp auth.Hash) (auth.Admin, bool) {
	found := -1
	for i, a := range h.admins {
		want := fingerprint(a.Hash)
		if subtle.ConstantTimeCompare(fp[:], want[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return auth.Admin{}, false
	}
	return h.admins[found], true
}

// AuthorizeSession is the admin API's check of the dashboard's cookie, for
// a request that carries no admin key: who acts (the credential the
// session logged in with, whose role the admin API enforces) when r has
// a live session and,
// for a method that changes anything, comes from the same origin with the
// session's CSRF token. No cookie at all is (nil, nil), so the admin
// API can say that its key is missing.
func (h *Handler) AuthorizeSession(r *http.Request) (*auth.Actor, *llm.Error) {
	l, e := h.sessionOf(r)
	if e != nil || l == nil {
		return nil, e
	}
	if !safeMethod(r.Method) {
		if e := h.checkChange(r, l.secret); e != nil {
			return nil, e
		}
	}
	return l.actor(), nil
}

// checkChange holds a state-changing request made with the cookie to the
// same origin and the session's CSRF token.
func (h *Handler) checkChange(r *http.Request, secret string) *llm.Error {
	if err := h.cross.Check(r); err != nil {
		return errCrossSite
	}
	got, want := r.Header.Get(CSRFHeader), csrfToken(secret)
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errCSRF
	}
	return nil
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// login serves POST /ui/api/login: {"admin_key": "…"} opens a session.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	// A login form posted from another site would log the victim into
	// the attacker's gateway session (login CSRF).
	if err := h.cross.Check(r); err != nil {
		errCrossSite.WriteOpenAI(w)
		return
	}
	if len(h.admins) == 0 {
		errNoAdminKey.WriteOpenAI(w)
		return
	}
	client := clientAddr(r)
	if wait := h.throttle.wait(client, h.o.Now()); wait > 0 {
		w.Header().Set("Retry-After", retryAfter(wait))
		e := &llm.Error{Kind: llm.KindRateLimit, Status: http.StatusTooManyRequests, Type: "rate_limit_error",
			Code: "too_many_logins", Message: "Too many failed logins from this address; try again in " + retryAfter(wait) + " s."}
		h.failedLogin(r, client, e)
		e.WriteOpenAI(w)
		return
	}
	var body struct {
		AdminKey string `json:"admin_key"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLoginBody)).Decode(&body); err != nil || body.AdminKey == "" {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			errLoginTooLarge.WriteOpenAI(w)
			return
		}
		errMissingKey.WriteOpenAI(w)
		return
	}
	admin, ok := h.admins.MatchSecret(body.AdminKey)
	if !ok {
		h.throttle.fail(client, h.o.Now())
		h.o.Log.Warn("ui: failed login", "client", client)
		h.failedLogin(r, client, errBadAdminKey)
		errBadAdminKey.WriteOpenAI(w)
		return
	}
	now := h.o.Now().UTC()
	secret := newSecret()
	se := &auth.Session{Hash: auth.HashKey(secret), AdminKey: fingerprint(admin.Hash), CreatedAt: now, ExpiresAt: now.Add(h.o.TTL)}
	// Expired sessions are swept here: logins are rare, and a store that
	// fails to sweep still lets the login through.
	if err := h.o.Sessions.DeleteExpiredSessions(r.Context(), now); err != nil {
		h.o.Log.Warn("ui: sweeping expired sessions", "error", err.Error())
	}
	if err := h.o.Sessions.CreateSession(r.Context(), se); err != nil {
		h.internal(r, err).WriteOpenAI(w)
		return
	}
	http.SetCookie(w, h.cookie(r, secret, se.ExpiresAt))
	h.audit(r, &audit.Entry{Actor: admin.Name, Role: string(admin.Role), Status: http.StatusOK})
	writeJSON(w, http.StatusOK, (&live{Session: se, secret: secret, admin: admin}).info())
}

// failedLogin records a refused login, coalesced per address and minute;
// who it was is unknown (the key matched nothing), and what was typed is
// never recorded.
func (h *Handler) failedLogin(r *http.Request, client string, e *llm.Error) {
	if h.o.Audit == nil {
		return
	}
	if ok, source, skipped := h.refusals.Admit(client, h.o.Now()); ok {
		h.audit(r, &audit.Entry{Actor: audit.UnknownActor, Status: e.Status, After: audit.Refusal(e.Code, source, skipped)})
	}
}

// audit writes e as a session entry of r. The login or logout it records
// has happened: a failure to write is logged, and the answer stands.
func (h *Handler) audit(r *http.Request, e *audit.Entry) {
	if h.o.Audit == nil {
		return
	}
	e.Time, e.Method, e.Path, e.ObjectType = h.o.Now(), r.Method, r.URL.Path, audit.ObjectSession
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditWriteTimeout)
	defer cancel()
	if err := h.o.Audit.AppendAudit(ctx, e); err != nil {
		h.o.Log.Error("ui: audit entry not written", "actor", e.Actor, "path", e.Path, "error", err.Error())
	}
}

// auditWriteTimeout bounds the write of one audit entry (as the admin
// API's does).
const auditWriteTimeout = 5 * time.Second

// logout serves POST /ui/api/logout: the session ends on every replica.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	l, e := h.sessionOf(r)
	if l == nil {
		// Nothing to end; still clear whatever cookie the browser holds.
		http.SetCookie(w, h.cookie(r, "", time.Time{}))
		if e == nil {
			e = errNoSession
		}
		e.WriteOpenAI(w)
		return
	}
	if e := h.checkChange(r, l.secret); e != nil {
		e.WriteOpenAI(w)
		return
	}
	if err := h.o.Sessions.DeleteSession(r.Context(), l.Hash); err != nil {
		h.internal(r, err).WriteOpenAI(w)
		return
	}
	http.SetCookie(w, h.cookie(r, "", time.Time{}))
	h.audit(r, &audit.Entry{Actor: l.actor().String(), Role: string(l.admin.Role), Status: http.StatusNoContent})
	w.WriteHeader(http.StatusNoContent)
}

// session serves GET /ui/api/session: the page asks on load whether it
// is logged in, and gets its CSRF token back after a reload. Not being
// logged in is an answer here, not an error (a 401 would put an error in
// the browser's console on every visit to the login page).
func (h *Handler) session(w http.ResponseWriter, r *http.Request) {
	l, e := h.sessionOf(r)
	switch {
	case l != nil:
		writeJSON(w, http.StatusOK, l.info())
	case e == nil || e == errSessionEnded:
		if e != nil { // the cookie is useless: let the browser drop it
			http.SetCookie(w, h.cookie(r, "", time.Time{}))
		}
		writeJSON(w, http.StatusOK, sessionInfo{})
	default:
		e.WriteOpenAI(w)
	}
}

// cookie builds the session cookie; an empty secret deletes it. It is
// Secure when the dashboard is reached over TLS, here or at a proxy in
// front that says so (a Secure cookie is only ever more restricted, so
// trusting the header cannot weaken it).
func (h *Handler) cookie(r *http.Request, secret string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: CookieName, Value: secret, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"}
	if secret == "" {
		c.MaxAge = -1
	} else {
		c.Expires = expires
	}
	return c
}

func (h *Handler) internal(r *http.Request, err error) *llm.Error {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return &llm.Error{Kind: llm.KindCanceled, Status: 499, Type: "invalid_request_error", Message: "request canceled"}
	}
	h.o.Log.Error("ui: session store failure", "error", err.Error())
	return &llm.Error{Kind: llm.KindInternal, Status: http.StatusInternalServerError, Type: "server_error",
		Code: "store_error", Message: "The session store failed; see the gateway log.", Cause: err}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
