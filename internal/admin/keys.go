package admin

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

// Secrets are SecretPrefix followed by secretLen base62 characters from
// crypto/rand: 32 × log2(62) ≈ 190 bits. The prefix lets people and
// secret scanners recognise a gatehouse key; the stored Prefix (the
// first prefixLen characters) tells keys apart without helping anyone
// guess the rest.
const (
	SecretPrefix = "gh-"
	secretLen    = 32
	prefixLen    = len(SecretPrefix) + 4
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewSecret returns a new key secret.
func NewSecret() string {
	out := make([]byte, 0, len(SecretPrefix)+secretLen)
	out = append(out, SecretPrefix...)
	var buf [64]byte
	for len(out) < cap(out) {
		rand.Read(buf[:]) // never fails (crypto/rand panics rather than return short)
		for _, b := range buf {
			// 248 = 4 × 62: rejecting the top 8 byte values keeps every
			// character equally likely.
			if b < 248 && len(out) < cap(out) {
				out = append(out, base62[b%62])
			}
		}
	}
	return string(out)
}

// keyView is a key as the API shows it. Secret is set only in the
// responses to create and rotate: the one time it is ever shown.
type keyView struct {
	auth.Key
	Status string `json:"status"` // active | revoked | expired
	Secret string `json:"key,omitempty"`
	Spend  *Spend `json:"spend,omitempty"` // of Budget, when the handler has Budgets
}

func (h *Handler) view(k *auth.Key) keyView {
	v := keyView{Key: *k, Status: "active"}
	switch {
	case k.RevokedAt != nil:
		v.Status = "revoked"
	case !k.Active(h.o.Now()):
		v.Status = "expired"
	}
	return v
}

func keyFields(now time.Time) []field[auth.Key] {
	return []field[auth.Key]{
		{name: "name", set: func(k *auth.Key, v json.RawMessage) error { return setString(&k.Name, v, true) }},
		{name: "rpm", set: func(k *auth.Key, v json.RawMessage) error { return setCount(&k.RPM, v) }},
		{name: "tpm", set: func(k *auth.Key, v json.RawMessage) error { return setCount(&k.TPM, v) }},
		{name: "budget", set: func(k *auth.Key, v json.RawMessage) error { return setBudget(&k.Budget, v) }},
		{name: "model_limits", set: func(k *auth.Key, v json.RawMessage) error { return setModelLimits(&k.ModelLimits, v) }},
		{name: "models", set: func(k *auth.Key, v json.RawMessage) error { return setList(&k.Models, v) }},
		{name: "providers", set: func(k *auth.Key, v json.RawMessage) error { return setList(&k.Providers, v) }},
		{name: "labels", set: func(k *auth.Key, v json.RawMessage) error { return setLabels(&k.Labels, v) }},
		{name: "expires_at", set: func(k *auth.Key, v json.RawMessage) error { return setFuture(&k.ExpiresAt, v, now) }},
		{name: "no_cache", set: func(k *auth.Key, v json.RawMessage) error { return setBool(&k.NoCache, v) }},
	}
}

// projectRef takes the required, create-only "project" member out of obj:
// a project ID or name.
func projectRef(obj map[string]json.RawMessage) (string, error) {
	v, ok := obj["project"]
	if !ok {
		return "", llm.BadRequest("project", "missing_field", "project: required (a project ID or name).")
	}
	delete(obj, "project")
	var ref string
	if err := setString(&ref, v, false); err != nil {
		return "", fieldError("project", err)
	}
	if ref == "" {
		return "", llm.BadRequest("project", "invalid_field", "project: must not be empty.")
	}
	return ref, nil
}

func (h *Handler) createKey(r *http.Request) (int, any, error) {
	obj, err := object(r)
	if err != nil {
		return 0, nil, err
	}
	ref, err := projectRef(obj)
	if err != nil {
		return 0, nil, err
	}
	var k auth.Key
	if err := apply(keyFields(h.o.Now()), obj, &k, true); err != nil {
		return 0, nil, err
	}
	if err := h.checkKeyModels(obj, &k); err != nil {
		return 0, nil, err
	}
	p, err := h.project(r.Context(), ref, "project")
	if err != nil {
		return 0, nil, err
	}
	k.ProjectID = p.ID
	secret := NewSecret()
	k.Hash = auth.HashKey(secret)
	k.Prefix = secret[:prefixLen]
	if err := h.o.Store.CreateKey(r.Context(), &k); err != nil {
		if errors.Is(err, auth.ErrNotFound) { // the project went away meanwhile
			return 0, nil, llm.BadRequest("project", "unknown_project", "project: no project %s.", quote(ref))
		}
		return 0, nil, err
	}
	v := h.keyView(r, &k)
	v.Secret = secret
	return http.StatusCreated, v, nil
}

func (h *Handler) listKeys(r *http.Request) (int, any, error) {
	pg, limit, projectID, err := h.projectPage(r, "search")
	if err != nil {
		return 0, nil, err
	}
	pg.Search = strings.TrimSpace(r.URL.Query().Get("search"))
	keys, err := h.o.Store.Keys(r.Context(), projectID, pg)
	if err != nil {
		return 0, nil, err
	}
	// The config's keys join the stored ones in ID order. Of the first
	// limit+1 records of the union, none can come from past the store's
	// first limit+1, so one store page is enough.
	for _, k := range h.o.Static {
		if k.ID > pg.After && (projectID == "" || k.ProjectID == projectID) && (pg.Search == "" || auth.KeyMatches(&k, pg.Search)) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b auth.Key) int { return strings.Compare(a.ID, b.ID) })
	if len(keys) > pg.Limit {
		keys = keys[:pg.Limit]
	}
	views := make([]keyView, len(keys))
	for i := range keys {
		views[i] = h.view(&keys[i])
	}
	l := newList(views, limit, func(v *keyView) string { return v.ID })
	h.keysSpend(r, l.Data)
	return http.StatusOK, l, nil
}

// key loads the key the path names, from the config or the store.
func (h *Handler) key(r *http.Request) (*auth.Key, error) {
	id := r.PathValue("id")
	if k, ok := h.static[id]; ok {
		c := *k
		return &c, nil
	}
	k, err := h.o.Store.Key(r.Context(), id)
	if errors.Is(err, auth.ErrNotFound) {
		return nil, notFoundError("key", id)
	}
	return k, err
}

// writableKey is key, refusing the read-only keys of the config.
func (h *Handler) writableKey(r *http.Request) (*auth.Key, error) {
	k, err := h.key(r)
	if err != nil {
		return nil, err
	}
	if k.ReadOnly {
		return nil, readOnlyError("key", k.ID)
	}
	return k, nil
}

func (h *Handler) getKey(r *http.Request) (int, any, error) {
	k, err := h.key(r)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, h.keyView(r, k), nil
}

func (h *Handler) updateKey(r *http.Request) (int, any, error) {
	k, err := h.writableKey(r)
	if err != nil {
		return 0, nil, err
	}
	obj, err := object(r)
	if err != nil {
		return 0, nil, err
	}
	if _, ok := obj["project"]; ok {
		return 0, nil, llm.BadRequest("project", "immutable_field", "project: a key cannot move to another project; create a new key there.")
	}
	if err := apply(keyFields(h.o.Now()), obj, k, false); err != nil {
		return 0, nil, err
	}
	if err := h.checkKeyModels(obj, k); err != nil {
		return 0, nil, err
	}
	if err := h.o.Store.UpdateKey(r.Context(), k); err != nil {
		if errors.Is(err, auth.ErrNotFound) {
			return 0, nil, notFoundError("key", k.ID)
		}
		return 0, nil, err
	}
	return http.StatusOK, h.keyView(r, k), nil
}

// revokeKey is DELETE: the key stops working at once and stays listed,
// revoked, for the record. Revoking twice keeps the first time.
func (h *Handler) revokeKey(r *http.Request) (int, any, error) {
	k, err := h.writableKey(r)
	if err != nil {
		return 0, nil, err
	}
	if err := h.o.Store.RevokeKey(r.Context(), k.ID, h.o.Now()); err != nil {
		if errors.Is(err, auth.ErrNotFound) {
			return 0, nil, notFoundError("key", k.ID)
		}
		return 0, nil, err
	}
	k, err = h.o.Store.Key(r.Context(), k.ID)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, h.keyView(r, k), nil
}

// rotateKey gives a key a new secret; its ID, settings and counters stay,
// and the old secret stops working at once.
func (h *Handler) rotateKey(r *http.Request) (int, any, error) {
	k, err := h.writableKey(r)
	if err != nil {
		return 0, nil, err
	}
	if k.RevokedAt != nil {
		return 0, nil, conflictError("", "key_revoked", "The key "+k.ID+" is revoked; create a new key instead.")
	}
	secret := NewSecret()
	if err := h.o.Store.RotateKey(r.Context(), k.ID, auth.HashKey(secret), secret[:prefixLen]); err != nil {
		if errors.Is(err, auth.ErrNotFound) {
			return 0, nil, notFoundError("key", k.ID)
		}
		return 0, nil, err
	}
	k, err = h.o.Store.Key(r.Context(), k.ID)
	if err != nil {
		return 0, nil, err
	}
	v := h.keyView(r, k)
	v.Secret = secret
	return http.StatusOK, v, nil
}

// checkKeyModels refuses models and model_limits, when this request sets
// them, that name a model the gateway does not serve. Only the members
// sent are checked: a key whose limits name a model since removed from
// the config can still be renamed.
func (h *Handler) checkKeyModels(obj map[string]json.RawMessage, k *auth.Key) error {
	if _, ok := obj["models"]; ok {
		if err := h.checkServed("models", k.Models); err != nil {
			return err
		}
	}
	if _, ok := obj["providers"]; ok {
		if err := h.checkProviders(k.Providers); err != nil {
			return err
		}
	}
	if _, ok := obj["model_limits"]; ok {
		names := make([]string, 0, len(k.ModelLimits))
		for m := range k.ModelLimits {
			names = append(names, m)
		}
		slices.Sort(names) // the same bad entry is always the one reported
		return h.checkServed("model_limits", names)
	}
	return nil
}

// checkProviders is the 400 for the first of names the config does not
// name as a provider.
func (h *Handler) checkProviders(names []string) error {
	if h.o.Provider == nil {
		return nil
	}
	for _, n := range names {
		if !h.o.Provider(n) {
			return llm.BadRequest("providers", "unknown_provider",
				"providers: the config names no provider %s (GET /admin/models lists the providers of every model).", quote(n))
		}
	}
	return nil
}

// checkServed is the 400 for the first of models the gateway does not
// serve.
func (h *Handler) checkServed(param string, models []string) error {
	if h.o.Served == nil {
		return nil
	}
	for _, m := range models {
		if !h.o.Served(m) {
			return llm.BadRequest(param, "unknown_model",
				"%s: the gateway serves no model %s (GET /v1/models lists those it serves).", param, quote(m))
		}
	}
	return nil
}
