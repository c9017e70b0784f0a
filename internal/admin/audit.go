package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

// auditWriteTimeout bounds the write of one audit entry. The change it
// records is already made, so the write goes on when the caller hangs up
// (an audit log that loses entries to impatient clients would be no log),
// but it may not hang the handler on a stuck store.
const auditWriteTimeout = 5 * time.Second

// objectType is what a route's path names, in the singular: "/admin/keys/{id}"
// is a key, "/admin/cache" the cache.
func objectType(pattern string) string {
	rest := strings.TrimPrefix(pattern, "/admin/")
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	switch rest {
	case "prices":
		return "price"
	case "cache":
		return "cache"
	}
	return strings.TrimSuffix(rest, "s")
}

// objectID is the ID a change names in its path, else the one its answer
// carries (a creation), else the project a cache purge was limited to.
func objectID(r *http.Request, after any) string {
	for _, name := range []string{"id", "model"} {
		if v := r.PathValue(name); v != "" {
			return v
		}
	}
	if b, err := json.Marshal(after); err == nil {
		var v struct {
			ID      string `json:"id"`
			Project string `json:"project"`
		}
		if json.Unmarshal(b, &v) == nil {
			if v.ID != "" {
				return v.ID
			}
			return v.Project
		}
	}
	return ""
}

// before reads the object a change is about to touch, as its GET shows
// it, for the audit entry; nil when there is none (a creation, a purge)
// or it cannot be read (the change will then fail alike and not be
// recorded).
func (h *Handler) before(r *http.Request, kind string) any {
	if h.o.Audit == nil || r.Method == http.MethodPost && r.PathValue("id") == "" {
		return nil
	}
	var read endpoint
	switch kind {
	case "project":
		read = h.getProject
	case "key":
		read = h.getKey
	case "customer":
		read = h.getCustomer
	case "price":
		read = h.priceBefore
	default:
		return nil
	}
	_, v, err := read(r)
	if err != nil {
		return nil
	}
	return v
}

// priceBefore is the stored price of the model the path names.
func (h *Handler) priceBefore(r *http.Request) (int, any, error) {
	ps, err := h.priceStore()
	if err != nil {
		return 0, nil, err
	}
	stored, err := ps.Prices(r.Context())
	if err != nil {
		return 0, nil, err
	}
	for _, p := range stored {
		if p.Model == r.PathValue("model") {
			return http.StatusOK, storedView(p), nil
		}
	}
	return 0, nil, notFoundError("price", r.PathValue("model"))
}

// errAuditDown refuses a change whose audit entry cannot be written:
// a change nobody could later find in the log is not made.
var errAuditDown = &llm.Error{Kind: llm.KindUnavailable, Status: http.StatusServiceUnavailable, Type: "server_error",
	Code: "audit_unavailable", Message: "The audit log cannot be written right now, so nothing was changed; try again shortly.",
	RetryAfter: time.Second}

// begin appends the audit entry of a change about to be made, with the
// object as it is (Status 0: under way). When the entry cannot be
// written it answers 503 and ok is false: the change must not be made.
// With no audit store it returns nil, true.
func (h *Handler) begin(w http.ResponseWriter, r *http.Request, pattern string, before any) (e *audit.Entry, ok bool) {
	if h.o.Audit == nil {
		return nil, true
	}
	a := actorOf(r)
	e = &audit.Entry{
		Time: h.o.Now(), Actor: a.String(), Role: string(a.Role), Method: r.Method, Path: r.URL.Path,
		ObjectType: objectType(pattern), ObjectID: objectID(r, nil),
	}
	if before != nil {
		e.Before = audit.Mask(before)
	}
	if err := h.o.Audit.AppendAudit(r.Context(), e); err != nil {
		if errors.Is(err, auth.ErrUnavailable) {
			// The record store is down: the change could not be made
			// either, and the caller hears so as for any other write.
			h.toError(r, err).WriteOpenAI(w)
			return nil, false
		}
		h.o.Log.Error("admin: audit entry not written; change refused", "actor", e.Actor, "method", e.Method, "path", e.Path,
			"error", err.Error())
		errAuditDown.WriteOpenAI(w)
		return nil, false
	}
	return e, true
}

// complete records in e (from begin; nil: no audit store) how its change
// ended: the status and body it was answered with. Secrets are masked
// before anything is stored: the key a creation or rotation returns once,
// whatever sits under a credential's name, and nothing of a key's hash
// (which its views never carry). The change is made by then; if this
// write fails the entry keeps status 0 (its outcome unknown), so the
// change is still in the log, and the gateway logs an error.
func (h *Handler) complete(r *http.Request, e *audit.Entry, status int, after any) {
	if e == nil {
		return
	}
	var issued string
	if v, ok := after.(keyView); ok {
		issued = v.Secret
	}
	e.Status = status
	if after != nil {
		e.ObjectID = objectID(r, after)
		e.After = audit.Mask(after, issued)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditWriteTimeout)
	defer cancel()
	if err := h.o.Audit.CompleteAudit(ctx, e); err != nil {
		h.o.Log.Error("admin: audit entry not completed", "audit_id", e.ID, "actor", e.Actor, "method", e.Method,
			"path", e.Path, "status", status, "error", err.Error())
	}
}

// refused records an attempt refused before any handler ran: who (the
// credential's name, "client:<key id>" for a client key, audit.UnknownActor
// when the key matched nothing; never the secret presented), what it
// asked for, the status and code it got and the client's address. Entries
// are coalesced per address and minute (audit.Refusals).
func (h *Handler) refused(r *http.Request, a auth.Actor, e *llm.Error) {
	if h.o.Audit == nil {
		return
	}
	ok, source, skipped := h.refusals.Admit(clientIP(r), h.o.Now())
	if !ok {
		return
	}
	actor := a.String()
	if actor == "" {
		actor = audit.UnknownActor
	}
	entry := &audit.Entry{
		Time: h.o.Now(), Actor: actor, Role: string(a.Role), Method: r.Method, Path: r.URL.Path,
		ObjectType: audit.ObjectAccess, Status: e.Status,
		After: audit.Refusal(e.Code, source, skipped),
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditWriteTimeout)
	defer cancel()
	if err := h.o.Audit.AppendAudit(ctx, entry); err != nil {
		h.o.Log.Error("admin: audit entry of a refused attempt not written", "actor", entry.Actor, "method", entry.Method,
			"path", entry.Path, "error", err.Error())
	}
}

// clientIP is the peer's address without its port. Forwarding headers
// are not trusted: a client could pick its own source and escape the
// coalescing of its refusals.
func clientIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// getAudit serves GET /admin/audit: the changes made through this API,
// oldest first, filtered by since, until, object_type and actor, a page
// at a time like every list.
func (h *Handler) getAudit(r *http.Request) (int, any, error) {
	if h.o.Audit == nil {
		return 0, nil, &llm.Error{Kind: llm.KindNotImplemented, Status: http.StatusNotImplemented, Type: "invalid_request_error",
			Code: "audit_unavailable", Message: "This gateway keeps no audit log (its store has none)."}
	}
	pg, err := page(r, "since", "until", "object_type", "actor")
	if err != nil {
		return 0, nil, err
	}
	q := audit.Query{After: pg.After, Limit: pg.Limit + 1, ObjectType: r.URL.Query().Get("object_type"), Actor: r.URL.Query().Get("actor")}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		s := r.URL.Query().Get(t.name)
		if s == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, nil, llm.BadRequest(t.name, "invalid_time", "%s: must be an RFC 3339 time such as 2026-11-27T10:00:00Z, not %s.", t.name, quote(s))
		}
		*t.dst = v
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return 0, nil, llm.BadRequest("until", "invalid_time", "until: must be after since.")
	}
	entries, err := h.o.Audit.Audit(r.Context(), q)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, newList(entries, pg.Limit, func(e *audit.Entry) string { return e.ID }), nil
}
