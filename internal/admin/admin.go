// Package admin is gatehouse's management API under /admin/: projects,
// virtual keys, customers and price overrides, created, listed, read, changed and removed
// over JSON by whoever holds the admin key. docs/openapi.yaml describes it
// and this package's tests hold the two together.
//
// admin works on an auth.Store it is handed and never imports a database
// driver or a store package; cmd/gatehouse builds the store and mounts the
// handler.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
	routing "gatehouse/internal/route"
	"gatehouse/internal/tokens"
)

// Authenticator recognises the client keys of the gateway, so a client key
// presented to /admin gets 403 (a real key, without the right) rather than
// 401 (no key at all).
type Authenticator interface {
	Authenticate(r *http.Request) (*auth.Principal, error)
}

// SessionAuthorizer recognises the dashboard's session (ui.Handler): who
// acts for a live session allowed this request, (nil, nil) when the
// request has no session at all, an error when its session is over or a
// change lacks its CSRF token or comes from another site. Whether the
// actor's role may make the change is the admin API's to decide.
type SessionAuthorizer interface {
	AuthorizeSession(r *http.Request) (*auth.Actor, *llm.Error)
}

// Options build a Handler. Store is required; the rest have safe zero values.
type Options struct {
	Store auth.Store
	// AdminKey is the SHA-256 of the admin key (config admin_key), the
	// credential named "admin" with the role admin. The zero Hash adds
	// nothing; with no Admins either, every request is refused with 401.
	AdminKey auth.Hash
	// Admins are the named credentials of admin_keys, each with a role:
	// a viewer may read but every change it asks for is refused with 403.
	Admins auth.Admins
	// Static are the read-only keys of the config file, with ProjectID set
	// (see EnsureProjects). They are listed with the stored keys and answer
	// 403 to every change.
	Static []auth.Key
	// Prices keeps the price overrides of /admin/prices; nil answers 501
	// there.
	Prices tokens.PriceStore
	// ConfigPrices are the config's pricing.overrides (USD per million
	// tokens, by model), listed with the store's.
	ConfigPrices map[string]tokens.StoredPrice
	// PricesChanged is called after a price is set or deleted, before the
	// answer, so the process serving requests reloads its prices at once.
	PricesChanged func(context.Context) error
	// Clients, when set, tells a client key apart from a wrong one.
	Clients Authenticator
	// Sessions, when set, lets the dashboard's session cookie stand in
	// for the admin key on a request that carries no key; nil accepts
	// the key only.
	Sessions SessionAuthorizer
	// Served, when set, says whether the gateway serves a model name
	// (configured or discovered). A key's or project's models and a key's
	// model_limits naming a model it does not serve are refused, as the
	// config check refuses them: a limit on a misspelt model would
	// silently limit nothing.
	Served func(model string) bool
	// Provider, when set, says whether the config names a provider; a
	// key's or project's providers naming another are refused, for the
	// same reason.
	Provider func(name string) bool
	// Budgets reads how much of their budgets projects, keys and
	// customers have spent, shown as their read-only spend fields; nil
	// leaves those fields out.
	Budgets Budgets
	// Usage answers the usage and request-log endpoints; nil answers
	// 501 there.
	Usage account.Querier
	// Cache is the response cache DELETE /admin/cache empties; nil
	// answers 501 there.
	Cache CachePurger
	// Routes, when set, copies the live routing state of every model for
	// GET /admin/models (route.Table.Snapshot of the current config);
	// nil answers 501 there.
	Routes func() []routing.ModelState
	// Route, when set, copies one model's state for GET
	// /admin/models/{model}, by the name clients send
	// (route.Table.State: discovered aliases too); nil looks the name up
	// in Routes' list.
	Route func(model string) (routing.ModelState, bool)
	// Semantic says the gateway runs a semantic cache (an embedder is
	// configured), so a project may turn it on.
	Semantic bool
	// Audit keeps the record of every change made through the API and
	// answers GET /admin/audit; nil records nothing and answers 501
	// there.
	Audit audit.Store
	// Log receives store failures (never secrets or bodies); nil discards.
	Log *slog.Logger
	// Now is the clock for expiry and revocation; nil means time.Now.
	Now func() time.Time
}

// Handler serves /admin/. It is safe for concurrent use and holds no state
// of its own beyond its Options, so a config reload simply builds a new one.
type Handler struct {
	o      Options
	mux    *http.ServeMux
	static map[string]*auth.Key // by ID
	admins auth.Admins          // AdminKey then Admins
	// refusals keeps refused attempts from flooding the audit log.
	refusals audit.Refusals
}

// maxBody bounds an admin request body; records are small.
const maxBody = 1 << 20

// Pagination: limit defaults to defaultLimit and may not exceed maxLimit.
const (
	defaultLimit = 100
	maxLimit     = 500
)

// New builds the handler.
func New(o Options) *Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Handler{o: o, static: make(map[string]*auth.Key, len(o.Static))}
	if !o.AdminKey.IsZero() {
		h.admins = append(h.admins, auth.Admin{Name: DefaultAdminName, Role: auth.RoleAdmin, Hash: o.AdminKey})
	}
	h.admins = append(h.admins, o.Admins...)
	for i := range o.Static {
		k := &h.o.Static[i]
		k.ReadOnly = true
		h.static[k.ID] = k
	}
	m := http.NewServeMux()
	for _, rt := range h.routes() {
		if rt.raw != nil {
			m.HandleFunc(rt.method+" "+rt.pattern, rt.raw)
			continue
		}
		m.HandleFunc(rt.method+" "+rt.pattern, h.handle(rt.pattern, rt.e))
	}
	h.mux = m
	return h
}

// route is one operation of the API: an endpoint answering one JSON
// value, or raw, a handler writing its own answer (the CSV export).
type route struct {
	method, pattern string
	e               endpoint
	raw             http.HandlerFunc
}

// routes lists every operation; docs/openapi.yaml documents each (the
// tests hold them together).
func (h *Handler) routes() []route {
	return []route{
		{"POST", "/admin/projects", h.createProject, nil},
		{"GET", "/admin/projects", h.listProjects, nil},
		{"GET", "/admin/projects/{id}", h.getProject, nil},
		{"PATCH", "/admin/projects/{id}", h.updateProject, nil},
		{"DELETE", "/admin/projects/{id}", h.deleteProject, nil},

		{"POST", "/admin/keys", h.createKey, nil},
		{"GET", "/admin/keys", h.listKeys, nil},
		{"GET", "/admin/keys/{id}", h.getKey, nil},
		{"PATCH", "/admin/keys/{id}", h.updateKey, nil},
		{"DELETE", "/admin/keys/{id}", h.revokeKey, nil},
		{"POST", "/admin/keys/{id}/rotate", h.rotateKey, nil},

		{"POST", "/admin/customers", h.createCustomer, nil},
		{"GET", "/admin/customers", h.listCustomers, nil},
		{"GET", "/admin/customers/{id}", h.getCustomer, nil},
		{"PATCH", "/admin/customers/{id}", h.updateCustomer, nil},
		{"DELETE", "/admin/customers/{id}", h.deleteCustomer, nil},

		{"GET", "/admin/prices", h.listPrices, nil},
		{"PUT", "/admin/prices/{model}", h.setPrice, nil},
		{"DELETE", "/admin/prices/{model}", h.deletePrice, nil},

		{"GET", "/admin/usage", h.getUsage, nil},
		{"GET", "/admin/logs", h.getLogs, nil},
		{"GET", "/admin/logs/{request_id}", h.getLog, nil},
		{"GET", "/admin/usage/export", nil, h.exportUsage}, // CSV, streamed

		{"DELETE", "/admin/cache", h.purgeCache, nil},

		{"GET", "/admin/models", h.getModels, nil},
		{"GET", "/admin/models/{model}", h.getModel, nil},

		{"GET", "/admin/audit", h.getAudit, nil},
	}
}

// DefaultAdminName names the single admin key (Options.AdminKey) in the
// audit log.
const DefaultAdminName = "admin"

// ServeHTTP checks the admin key and its role, then routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	actor, err := h.authorize(r)
	if err != nil {
		if err.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse admin"`)
		}
		h.refused(r, actor, err)
		err.WriteOpenAI(w)
		return
	}
	if !safeMethod(r.Method) && !actor.Role.CanWrite() {
		err := readOnlyRoleError(actor)
		h.refused(r, actor, err)
		err.WriteOpenAI(w)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), actorKey{}, actor))
	// The mux answers a known path with the wrong method, and an unknown
	// path, in plain text; find out first and answer in JSON.
	if _, pattern := h.mux.Handler(r); pattern == "" {
		routeError(r, h.mux).WriteOpenAI(w)
		return
	}
	h.mux.ServeHTTP(w, r)
}

var (
	errNoAdminKey = &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "authentication_error",
		Code: "missing_admin_key", Message: "The admin API needs the admin key: send 'Authorization: Bearer ADMIN_KEY'."}
	errBadAdminKey = &llm.Error{Kind: llm.KindAuth, Status: http.StatusUnauthorized, Type: "authentication_error",
		Code: "invalid_admin_key", Message: "Incorrect admin key provided."}
	errClientKey = &llm.Error{Kind: llm.KindPermission, Status: http.StatusForbidden, Type: "permission_error",
		Code: "insufficient_permissions", Message: "This is a client key; the admin API needs the admin key."}
)

// authorize finds who is calling: an admin credential by its key, or the
// dashboard session the request carries when it has no key.
func (h *Handler) authorize(r *http.Request) (auth.Actor, *llm.Error) {
	secret := bearer(r)
	if secret == "" {
		if h.o.Sessions != nil {
			a, err := h.o.Sessions.AuthorizeSession(r)
			if err != nil {
				return auth.Actor{}, err
			}
			if a != nil {
				return *a, nil
			}
		}
		return auth.Actor{}, errNoAdminKey
	}
	// Match compares fixed-length hashes in constant time against every
	// credential, so timing tells nothing of what a guess shares with a
	// real key.
	if a, ok := h.admins.MatchSecret(secret); ok {
		return auth.Actor{Name: a.Name, Role: a.Role}, nil
	}
	if h.o.Clients != nil {
		if p, err := h.o.Clients.Authenticate(r); err == nil {
			// Named by its ID in the audit log: a client key is no
			// admin credential, but who held it is worth knowing.
			return auth.Actor{Name: "client:" + p.KeyID}, errClientKey
		}
	}
	return auth.Actor{}, errBadAdminKey
}

// actorKey is the context key of the auth.Actor of a request that passed
// authorize.
type actorKey struct{}

// actorOf is who made r (zero outside ServeHTTP, as in tests of one
// endpoint).
func actorOf(r *http.Request) auth.Actor {
	a, _ := r.Context().Value(actorKey{}).(auth.Actor)
	return a
}

func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

func readOnlyRoleError(a auth.Actor) *llm.Error {
	return &llm.Error{Kind: llm.KindPermission, Status: http.StatusForbidden, Type: "permission_error",
		Code: "read_only_role", Message: "The admin credential " + quote(a.Name) + " has the role " + string(a.Role) + ", which may read but not change anything."}
}

// bearer is the admin key as sent: "Authorization: Bearer …" only; admin
// tools are not Anthropic SDKs.
func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// routeError explains why the mux found no route: a wrong method on a
// known path (405 with Allow) or an unknown path (404).
func routeError(r *http.Request, mux *http.ServeMux) *llm.Error {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := mux.Handler(probe); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		return &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
			Code: "method_not_allowed", Message: "Method " + r.Method + " is not allowed on " + r.URL.Path + "; use " + strings.Join(allow, ", ") + "."}
	}
	return &llm.Error{Kind: llm.KindNotFound, Status: http.StatusNotFound, Type: "invalid_request_error",
		Code: "unknown_url", Message: "Unknown admin URL: " + r.Method + " " + r.URL.Path + "."}
}

// endpoint is one operation: it returns the status and body of a success,
// or an error.
type endpoint func(r *http.Request) (int, any, error)

// handle serves one endpoint. A change is recorded in the audit log
// before it is made, with the object as it was, and the entry completed
// with how it ended: a change whose entry cannot be written is not made.
func (h *Handler) handle(pattern string, e endpoint) http.HandlerFunc {
	kind := objectType(pattern)
	return func(w http.ResponseWriter, r *http.Request) {
		var entry *audit.Entry
		change := !safeMethod(r.Method)
		if change {
			var ok bool
			if entry, ok = h.begin(w, r, pattern, h.before(r, kind)); !ok {
				return
			}
		}
		status, body, err := e(r)
		if err != nil {
			ge := h.toError(r, err)
			h.complete(r, entry, ge.Status, nil)
			ge.WriteOpenAI(w)
			return
		}
		h.complete(r, entry, status, body)
		b, err := json.Marshal(body)
		if err != nil {
			h.toError(r, err).WriteOpenAI(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(append(b, '\n'))
	}
}

// toError turns a failure into what the caller reads; causes that are not
// already client errors are logged and hidden.
func (h *Handler) toError(r *http.Request, err error) *llm.Error {
	var ge *llm.Error
	if errors.As(err, &ge) {
		return ge
	}
	if errors.Is(err, r.Context().Err()) && r.Context().Err() != nil {
		return &llm.Error{Kind: llm.KindCanceled, Status: 499, Type: "invalid_request_error", Message: "request canceled"}
	}
	if errors.Is(err, auth.ErrUnavailable) {
		// The database is down or restarting: nothing was changed, and
		// the same call will work once it is back. The request path
		// meanwhile serves keys from its cache.
		h.o.Log.Warn("admin: record store unavailable", "method", r.Method, "path", r.URL.Path, "error", err.Error())
		return &llm.Error{Kind: llm.KindUnavailable, Status: http.StatusServiceUnavailable, Type: "server_error",
			Code: "store_unavailable", Message: "The record store cannot be reached right now; try again shortly.",
			RetryAfter: time.Second, Cause: err}
	}
	h.o.Log.Error("admin: store failure", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	return &llm.Error{Kind: llm.KindInternal, Status: http.StatusInternalServerError, Type: "server_error",
		Code: "store_error", Message: "The record store failed; see the gateway log.", Cause: err}
}

// Errors shared by the resources.

func notFoundError(kind, id string) *llm.Error {
	return &llm.Error{Kind: llm.KindNotFound, Status: http.StatusNotFound, Type: "invalid_request_error",
		Code: kind + "_not_found", Message: "No " + kind + " " + quote(id) + "."}
}

func readOnlyError(kind, id string) *llm.Error {
	return &llm.Error{Kind: llm.KindPermission, Status: http.StatusForbidden, Type: "permission_error",
		Code: "read_only", Message: "The " + kind + " " + quote(id) + " is defined in the config file and cannot be changed through the API; edit the config file instead."}
}

func conflictError(param, code, msg string) *llm.Error {
	return &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusConflict, Type: "invalid_request_error",
		Code: code, Param: param, Message: msg}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
