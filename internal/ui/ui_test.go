package ui

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"gatehouse/internal/auth"
)

const adminKey = "gh-admin-ui-test"

// memSessions is an auth.SessionStore in a map: the contract the real
// stores pass is storetest's; here only ui's use of it is under test.
type memSessions struct {
	mu sync.Mutex
	m  map[auth.Hash]auth.Session
}

func (s *memSessions) CreateSession(_ context.Context, se *auth.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[se.Hash]; ok {
		return auth.ErrConflict
	}
	s.m[se.Hash] = *se
	return nil
}

func (s *memSessions) SessionByHash(_ context.Context, h auth.Hash) (*auth.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.m[h]
	if !ok {
		return nil, auth.ErrNotFound
	}
	return &se, nil
}

func (s *memSessions) DeleteSession(_ context.Context, h auth.Hash) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, h)
	return nil
}

func (s *memSessions) DeleteExpiredSessions(_ context.Context, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, se := range s.m {
		if se.ExpiresAt.Before(now) {
			delete(s.m, h)
		}
	}
	return nil
}

func (s *memSessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// clock is a fake clock the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var assets = fstest.MapFS{
	"index.html":           {Data: []byte("<!doctype html><title>gatehouse</title>" + strings.Repeat(" ", 2000))},
	"assets/index-abc.js":  {Data: []byte("console.log('dashboard');" + strings.Repeat("/* padding */", 200))},
	"assets/index-abc.css": {Data: []byte("body{}")},
}

type env struct {
	h     *Handler
	store *memSessions
	clock *clock
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{store: &memSessions{m: map[auth.Hash]auth.Session{}}, clock: &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}}
	e.h = e.handler(t, adminKey)
	return e
}

// handler builds a Handler over the env's store and clock, as a reload
// with admin key key would.
func (e *env) handler(t *testing.T, key string) *Handler {
	t.Helper()
	var hash auth.Hash // zero: no admin key configured
	if key != "" {
		hash = auth.HashKey(key)
	}
	h, err := New(Options{Sessions: e.store, AdminKey: hash, TTL: time.Hour, Assets: assets,
		OpenAPI: []byte("openapi: 3.1.0\ninfo: {title: gatehouse, version: test}\npaths: {}\n"), Now: e.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func do(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func loginRequest(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://gw.test/ui/api/login", strings.NewReader(`{"admin_key":"`+key+`"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", "http://gw.test")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	return r
}

// login logs in and returns the cookie and CSRF token.
func (e *env) login(t *testing.T) (*http.Cookie, string) {
	t.Helper()
	w := do(e.h, loginRequest(adminKey))
	if w.Code != http.StatusOK {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	var info struct {
		LoggedIn  bool   `json:"logged_in"`
		CSRFToken string `json:"csrf_token"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &info); err != nil || !info.LoggedIn || info.CSRFToken == "" {
		t.Fatalf("login answer %s (%v)", w.Body, err)
	}
	cs := w.Result().Cookies()
	if len(cs) != 1 || cs[0].Name != CookieName {
		t.Fatalf("login set cookies %v", cs)
	}
	return cs[0], info.CSRFToken
}

// errCode is the code of an OpenAI-shaped error body.
func errCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var b struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	return b.Error.Code
}

func TestLoginSetsAStrictCookie(t *testing.T) {
	e := newEnv(t)
	c, _ := e.login(t)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Errorf("cookie over plain HTTP = %+v; want HttpOnly, SameSite=Strict, Path=/, not Secure", c)
	}
	if want := e.clock.now().Add(time.Hour); !c.Expires.Equal(want.Truncate(time.Second)) {
		t.Errorf("cookie expires %v, want %v", c.Expires, want)
	}
	if len(c.Value) < 40 {
		t.Errorf("session secret %q is too short to be unguessable", c.Value)
	}
	if e.store.len() != 1 {
		t.Fatalf("store holds %d sessions, want 1", e.store.len())
	}
	for _, se := range e.store.m {
		if se.Hash != auth.HashKey(c.Value) {
			t.Error("the store keeps something other than the hash of the cookie's secret")
		}
		if se.AdminKey == auth.HashKey(adminKey) {
			t.Error("the store keeps the admin key's hash itself, not a fingerprint of it")
		}
	}

	// Over TLS, or behind a proxy that terminated TLS, the cookie is Secure.
	for name, r := range map[string]*http.Request{"tls": loginRequest(adminKey), "proxy": loginRequest(adminKey)} {
		if name == "tls" {
			r.TLS = &tls.ConnectionState{}
		} else {
			r.Header.Set("X-Forwarded-Proto", "https")
		}
		w := do(e.h, r)
		if cs := w.Result().Cookies(); w.Code != 200 || len(cs) != 1 || !cs[0].Secure {
			t.Errorf("%s: login %d, cookies %v; want one Secure cookie", name, w.Code, cs)
		}
	}
}

func TestLoginRefusals(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
	}{
		{"wrong key", func() *http.Request { return loginRequest("gh-wrong") }, 401, "invalid_admin_key"},
		{"no key", func() *http.Request { return loginRequest("") }, 400, "missing_admin_key"},
		{"not JSON", func() *http.Request {
			r := loginRequest(adminKey)
			r.Body = io.NopCloser(strings.NewReader("admin_key=" + adminKey))
			return r
		}, 400, "missing_admin_key"},
		{"body too large", func() *http.Request {
			r := loginRequest(adminKey)
			r.Body = io.NopCloser(strings.NewReader(`{"admin_key":"` + strings.Repeat("x", maxLoginBody) + `"}`))
			return r
		}, 413, "request_too_large"},
		{"cross-site form", func() *http.Request {
			r := loginRequest(adminKey)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Origin", "https://evil.example")
			return r
		}, 403, "cross_site_request"},
		{"GET", func() *http.Request { return httptest.NewRequest(http.MethodGet, "/ui/api/login", nil) }, 405, "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := do(e.h, c.req())
			if w.Code != c.status || errCode(t, w) != c.code {
				t.Errorf("got %d %s, want %d %s", w.Code, w.Body, c.status, c.code)
			}
			if len(w.Result().Cookies()) != 0 {
				t.Errorf("a refused login set a cookie: %v", w.Result().Cookies())
			}
		})
	}
	if e.store.len() != 0 {
		t.Errorf("refused logins stored %d sessions", e.store.len())
	}

	// Without an admin key nobody logs in, and the answer says why.
	off := e.handler(t, "")
	if w := do(off, loginRequest("")); w.Code != 401 || errCode(t, w) != "admin_disabled" {
		t.Errorf("no admin key: %d %s", w.Code, w.Body)
	}
}

func TestLoginThrottle(t *testing.T) {
	e := newEnv(t)
	for i := range maxFailures {
		if w := do(e.h, loginRequest("gh-guess")); w.Code != 401 {
			t.Fatalf("try %d: %d, want 401", i, w.Code)
		}
	}
	// Even the right key waits out the window: the throttle does not
	// tell a guesser which try was right.
	w := do(e.h, loginRequest(adminKey))
	if w.Code != 429 || errCode(t, w) != "too_many_logins" || w.Header().Get("Retry-After") != "60" {
		t.Fatalf("after %d failures: %d %s Retry-After %q; want 429 too_many_logins, 60", maxFailures, w.Code, w.Body, w.Header().Get("Retry-After"))
	}
	// Another address is not held back.
	r := loginRequest(adminKey)
	r.RemoteAddr = "192.0.2.77:4000"
	if w := do(e.h, r); w.Code != 200 {
		t.Errorf("another client: %d", w.Code)
	}
	e.clock.add(failureWindow)
	if w := do(e.h, loginRequest(adminKey)); w.Code != 200 {
		t.Errorf("after the window: %d %s", w.Code, w.Body)
	}
}

// adminRequest is a request to the admin API as the dashboard's page
// makes it: same origin, with the cookie.
func adminRequest(method string, c *http.Cookie, csrf string) *http.Request {
	r := httptest.NewRequest(method, "http://gw.test/admin/keys", nil)
	r.AddCookie(c)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	r.Header.Set("Origin", "http://gw.test")
	if csrf != "" {
		r.Header.Set(CSRFHeader, csrf)
	}
	return r
}

func TestAuthorizeSession(t *testing.T) {
	e := newEnv(t)
	c, csrf := e.login(t)
	cases := []struct {
		name string
		req  func() *http.Request
		ok   bool
		code string // when refused; "" with !ok: no session at all
	}{
		{"read", func() *http.Request { return adminRequest(http.MethodGet, c, "") }, true, ""},
		{"change with token", func() *http.Request { return adminRequest(http.MethodPost, c, csrf) }, true, ""},
		{"change without token", func() *http.Request { return adminRequest(http.MethodPost, c, "") }, false, "invalid_csrf_token"},
		{"change with another token", func() *http.Request { return adminRequest(http.MethodDelete, c, csrf[:len(csrf)-2]+"xx") }, false, "invalid_csrf_token"},
		{"cross-site change", func() *http.Request {
			r := adminRequest(http.MethodPost, c, csrf)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Origin", "https://evil.example")
			return r
		}, false, "cross_site_request"},
		{"other origin, old browser", func() *http.Request {
			r := adminRequest(http.MethodPatch, c, csrf)
			r.Header.Del("Sec-Fetch-Site")
			r.Header.Set("Origin", "https://evil.example")
			return r
		}, false, "cross_site_request"},
		{"forged cookie", func() *http.Request {
			return adminRequest(http.MethodGet, &http.Cookie{Name: CookieName, Value: "forged"}, "")
		}, false, "session_expired"},
		{"no cookie", func() *http.Request { return httptest.NewRequest(http.MethodGet, "/admin/keys", nil) }, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := authorized(e.h, tc.req())
			code := ""
			if err != nil {
				code = err.Code
			}
			if ok != tc.ok || code != tc.code {
				t.Errorf("AuthorizeSession = %v, %q; want %v, %q", ok, code, tc.ok, tc.code)
			}
		})
	}
}

func TestSessionEnds(t *testing.T) {
	t.Run("expiry", func(t *testing.T) {
		e := newEnv(t)
		c, _ := e.login(t)
		e.clock.add(time.Hour - time.Second)
		if ok, err := authorized(e.h, adminRequest(http.MethodGet, c, "")); !ok {
			t.Fatalf("a second before expiry: %v", err)
		}
		e.clock.add(time.Second)
		if ok, err := authorized(e.h, adminRequest(http.MethodGet, c, "")); ok || err == nil || err.Code != "session_expired" {
			t.Fatalf("at expiry: %v, %v; want session_expired", ok, err)
		}
		// The page, asking, hears it is logged out and loses the cookie.
		r := httptest.NewRequest(http.MethodGet, "/ui/api/session", nil)
		r.AddCookie(c)
		w := do(e.h, r)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"logged_in":false`) {
			t.Errorf("session after expiry: %d %s", w.Code, w.Body)
		}
		if cs := w.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
			t.Errorf("session after expiry set cookies %v; want the cookie deleted", cs)
		}
		// A later login sweeps the expired session from the store.
		e.clock.add(time.Second)
		e.login(t)
		if e.store.len() != 1 {
			t.Errorf("store holds %d sessions after a login past expiry, want 1", e.store.len())
		}
	})
	t.Run("admin key changed", func(t *testing.T) {
		e := newEnv(t)
		c, _ := e.login(t)
		reloaded := e.handler(t, "gh-admin-rotated")
		if ok, err := authorized(reloaded, adminRequest(http.MethodGet, c, "")); ok || err == nil || err.Code != "session_expired" {
			t.Fatalf("after the admin key changed: %v, %v; want session_expired", ok, err)
		}
		// A reload with the same key keeps sessions.
		same := e.handler(t, adminKey)
		if ok, err := authorized(same, adminRequest(http.MethodGet, c, "")); !ok {
			t.Fatalf("after a reload with the same key: %v", err)
		}
	})
	t.Run("logout", func(t *testing.T) {
		e := newEnv(t)
		c, csrf := e.login(t)
		out := func(token string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "http://gw.test/ui/api/logout", nil)
			r.AddCookie(c)
			r.Header.Set("Sec-Fetch-Site", "same-origin")
			if token != "" {
				r.Header.Set(CSRFHeader, token)
			}
			return do(e.h, r)
		}
		// A page of another site cannot log the operator out either.
		if w := out(""); w.Code != 403 || errCode(t, w) != "invalid_csrf_token" {
			t.Fatalf("logout without token: %d %s", w.Code, w.Body)
		}
		w := out(csrf)
		if w.Code != http.StatusNoContent {
			t.Fatalf("logout: %d %s", w.Code, w.Body)
		}
		if cs := w.Result().Cookies(); len(cs) != 1 || cs[0].MaxAge >= 0 {
			t.Errorf("logout set cookies %v; want the cookie deleted", cs)
		}
		if e.store.len() != 0 {
			t.Errorf("store holds %d sessions after logout", e.store.len())
		}
		if ok, err := authorized(e.h, adminRequest(http.MethodGet, c, "")); ok || err == nil {
			t.Error("the cookie still works after logout")
		}
	})
}

func TestAssetsAndHeaders(t *testing.T) {
	e := newEnv(t)
	get := func(path string, hdr ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return do(e.h, r)
	}
	cases := []struct {
		path, ctype, cache string
		status             int
		body               string
	}{
		{"/ui/", "text/html; charset=utf-8", "no-cache", 200, "<title>gatehouse</title>"},
		{"/ui/keys", "text/html; charset=utf-8", "no-cache", 200, "<title>gatehouse</title>"},
		{"/ui/logs/req_1", "text/html; charset=utf-8", "no-cache", 200, "<title>gatehouse</title>"},
		{"/ui/assets/index-abc.js", "text/javascript; charset=utf-8", "public, max-age=31536000, immutable", 200, "console.log"},
		{"/ui/assets/index-abc.css", "text/css; charset=utf-8", "public, max-age=31536000, immutable", 200, "body{}"},
		{"/ui/assets/gone.js", "application/json", "no-store", 404, "unknown_url"},
		{"/ui/favicon.ico", "application/json", "no-store", 404, "unknown_url"},
		{"/ui/api/openapi.json", "application/json", "no-cache", 200, `"openapi":"3.1.0"`},
		{"/ui/api/nothing", "application/json", "no-store", 404, "unknown_url"},
	}
	for _, c := range cases {
		w := get(c.path)
		if w.Code != c.status || w.Header().Get("Content-Type") != c.ctype || w.Header().Get("Cache-Control") != c.cache ||
			!strings.Contains(w.Body.String(), c.body) {
			t.Errorf("GET %s: %d %q %q %.80q; want %d %q %q …%s…", c.path, w.Code, w.Header().Get("Content-Type"),
				w.Header().Get("Cache-Control"), w.Body, c.status, c.ctype, c.cache, c.body)
		}
		csp := w.Header().Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", c.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: CSP %q allows inline code", c.path, csp)
		}
		for h, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if got := w.Header().Get(h); got != v {
				t.Errorf("GET %s: %s = %q, want %q", c.path, h, got, v)
			}
		}
		if hsts := w.Header().Get("Strict-Transport-Security"); hsts != "" {
			t.Errorf("GET %s over plain HTTP: Strict-Transport-Security %q", c.path, hsts)
		}
	}
	// Over TLS, browsers are told to keep to HTTPS.
	tr := httptest.NewRequest(http.MethodGet, "https://gw/ui/", nil)
	if hsts := do(e.h, tr).Header().Get("Strict-Transport-Security"); !strings.HasPrefix(hsts, "max-age=") {
		t.Errorf("GET /ui/ over TLS: Strict-Transport-Security %q", hsts)
	}

	// Compressed when the browser accepts it, and revalidated by ETag.
	w := get("/ui/assets/index-abc.js", "Accept-Encoding", "br, gzip")
	if w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip not used: %v", w.Header())
	}
	zr, err := gzip.NewReader(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Equal(plain, assets["assets/index-abc.js"].Data) {
		t.Error("gzipped body differs from the asset")
	}
	if w := get("/ui/assets/index-abc.js", "Accept-Encoding", "gzip;q=0"); w.Header().Get("Content-Encoding") != "" {
		t.Error("gzip sent although refused with q=0")
	}
	etag := w.Header().Get("ETag")
	if w := get("/ui/assets/index-abc.js", "If-None-Match", etag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("If-None-Match: %d with %d bytes, want 304 and none", w.Code, w.Body.Len())
	}

	if w := get("/ui"); w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/ui/" {
		t.Errorf("/ui: %d %v", w.Code, w.Header())
	}
	r := httptest.NewRequest(http.MethodPost, "/ui/keys", nil)
	if w := do(e.h, r); w.Code != 405 || errCode(t, w) != "method_not_allowed" {
		t.Errorf("POST /ui/keys: %d %s", w.Code, w.Body)
	}
}

func TestNewNeedsAnIndex(t *testing.T) {
	_, err := New(Options{Sessions: &memSessions{}, Assets: fstest.MapFS{"assets/a.js": {Data: []byte("x")}}})
	if err == nil || !strings.Contains(err.Error(), "index.html") {
		t.Fatalf("New without index.html: %v", err)
	}
	_, err = New(Options{Sessions: &memSessions{}, Assets: assets, OpenAPI: []byte("paths: [unclosed")})
	if err == nil {
		t.Fatal("New with a broken OpenAPI document: no error")
	}
}
