// Package ui serves the dashboard under /ui/: the built single-page app
// (embedded in the binary by the web package), the login that trades the
// admin key for a session cookie, and the check by which the admin API
// accepts that cookie in place of the key. Every number the dashboard
// shows comes from the admin API; ui adds no data endpoint of its own
// beyond the OpenAPI document it renders.
//
// ui holds no data: sessions live in an auth.SessionStore, so they are
// shared by replicas and survive restarts. It imports no database driver.
package ui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

// Options build a Handler. Sessions and Assets are required.
type Options struct {
	Sessions auth.SessionStore
	// AdminKey is the SHA-256 of the admin key (the credential "admin",
	// role admin); the zero Hash adds none. With no Admins either, every
	// login is refused (the dashboard then says how to set one).
	AdminKey auth.Hash
	// Admins are the named credentials of admin_keys: each may log in,
	// and its session has its role.
	Admins auth.Admins
	// TTL is how long a session lasts from login; DefaultTTL when zero.
	TTL time.Duration
	// Assets is the built dashboard: index.html at its root, hashed
	// bundles under assets/.
	Assets fs.FS
	// OpenAPI is docs/openapi.yaml, served as JSON to the API reference
	// page.
	OpenAPI []byte
	// Log receives failed logins (with the client's address, never the
	// key) and store failures; nil discards.
	Log *slog.Logger
	// Now is the clock of session expiry and login throttling; nil means
	// time.Now.
	Now func() time.Time
	// Audit, when set, records logins and logouts, failed logins
	// coalesced per client address and minute (audit.Refusals).
	Audit audit.Store
}

// Handler serves /ui/. Like the admin handler it is rebuilt on every
// config reload (the admin key may change); its sessions are in the store.
type Handler struct {
	o        Options
	assets   map[string]*asset // by path below /ui/, e.g. "assets/index-3f2a.js"
	openapi  *asset
	throttle *throttle
	cross    *http.CrossOriginProtection
	admins   auth.Admins // AdminKey then Admins
	refusals audit.Refusals
}

// asset is one file, compressed once at start: the dashboard is a few
// hundred kilobytes, so holding both forms costs little and spares every
// response a gzip pass.
type asset struct {
	body, gz []byte
	ctype    string
	etag     string
}

// New builds the handler, reading and compressing every asset.
func New(o Options) (*Handler, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	h := &Handler{o: o, assets: map[string]*asset{}, throttle: newThrottle(), cross: http.NewCrossOriginProtection()}
	if !o.AdminKey.IsZero() {
		h.admins = append(h.admins, auth.Admin{Name: "admin", Role: auth.RoleAdmin, Hash: o.AdminKey})
	}
	h.admins = append(h.admins, o.Admins...)
	err := fs.WalkDir(o.Assets, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(o.Assets, p)
		if err != nil {
			return err
		}
		h.assets[p] = newAsset(b, mime.TypeByExtension(path.Ext(p)))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ui: reading the dashboard's assets: %w", err)
	}
	if h.assets["index.html"] == nil {
		return nil, fmt.Errorf("ui: the dashboard's assets have no index.html (run make ui)")
	}
	if len(o.OpenAPI) > 0 {
		j, err := yaml.YAMLToJSON(o.OpenAPI)
		if err != nil {
			return nil, fmt.Errorf("ui: docs/openapi.yaml: %w", err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, j); err != nil {
			return nil, fmt.Errorf("ui: docs/openapi.yaml as JSON: %w", err)
		}
		h.openapi = newAsset(compact.Bytes(), "application/json")
	}
	return h, nil
}

func newAsset(b []byte, ctype string) *asset {
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	sum := sha256.Sum256(b)
	a := &asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	if buf.Len() < len(b) {
		a.gz = buf.Bytes()
	}
	return a
}

// contentSecurityPolicy allows only the dashboard's own scripts, styles
// and API calls: no inline script or style, no framing, no plugins.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ServeHTTP routes /ui/…; every answer carries the security headers.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	if r.TLS != nil {
		// Only over HTTPS: sent over plain HTTP it would be ignored, and
		// a gateway reached both ways must not lock browsers out of one.
		hd.Set("Strict-Transport-Security", "max-age=31536000")
	}

	rest, ok := strings.CutPrefix(r.URL.Path, "/ui/")
	if !ok {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		return
	}
	if api, ok := strings.CutPrefix(rest, "api/"); ok {
		hd.Set("Cache-Control", "no-store")
		h.api(w, r, api)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		methodNotAllowed(r, "GET").WriteOpenAI(w)
		return
	}
	a := h.assets[rest]
	switch {
	case a != nil && strings.HasPrefix(rest, "assets/"):
		// Bundles are named by their content hash: cache them for good.
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	case a != nil:
		hd.Set("Cache-Control", "no-cache")
	case strings.HasPrefix(rest, "assets/") || path.Ext(rest) != "":
		hd.Set("Cache-Control", "no-store")
		notFound(r).WriteOpenAI(w)
		return
	default:
		// A page of the app (/ui/keys, /ui/logs/…): the app routes it.
		a = h.assets["index.html"]
		hd.Set("Cache-Control", "no-cache")
	}
	h.serveAsset(w, r, a)
}

// api serves /ui/api/…: the session endpoints and the OpenAPI document.
func (h *Handler) api(w http.ResponseWriter, r *http.Request, p string) {
	type op struct {
		method string
		fn     http.HandlerFunc
	}
	ops := map[string]op{
		"login":        {http.MethodPost, h.login},
		"logout":       {http.MethodPost, h.logout},
		"session":      {http.MethodGet, h.session},
		"openapi.json": {http.MethodGet, h.serveOpenAPI},
	}
	o, ok := ops[p]
	if !ok {
		notFound(r).WriteOpenAI(w)
		return
	}
	if r.Method != o.method && !(o.method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", o.method)
		methodNotAllowed(r, o.method).WriteOpenAI(w)
		return
	}
	o.fn(w, r)
}

// serveOpenAPI serves the API reference's document. It is public, like
// the repository it comes from: it describes the API, it holds no data.
func (h *Handler) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	if h.openapi == nil {
		notFound(r).WriteOpenAI(w)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	h.serveAsset(w, r, h.openapi)
}

func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request, a *asset) {
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	hd.Set("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && acceptsGzip(r) {
		hd.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	hd.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func notFound(r *http.Request) *llm.Error {
	return &llm.Error{Kind: llm.KindNotFound, Status: http.StatusNotFound, Type: "invalid_request_error",
		Code: "unknown_url", Message: "Unknown dashboard URL: " + r.Method + " " + r.URL.Path + "."}
}

func methodNotAllowed(r *http.Request, allow string) *llm.Error {
	return &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
		Code: "method_not_allowed", Message: "Method " + r.Method + " is not allowed on " + r.URL.Path + "; use " + allow + "."}
}
