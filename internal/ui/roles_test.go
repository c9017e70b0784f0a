package ui

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

// authorized is AuthorizeSession as a yes or no.
func authorized(h *Handler, r *http.Request) (bool, *llm.Error) {
	a, err := h.AuthorizeSession(r)
	return a != nil, err
}

const viewerKey = "gh-viewer-ui-test"

func TestSessionCarriesTheRole(t *testing.T) {
	e := newEnv(t)
	admins := auth.Admins{{Name: "dash", Role: auth.RoleViewer, Hash: auth.HashKey(viewerKey)}}
	h, err := New(Options{Sessions: e.store, AdminKey: auth.HashKey(adminKey), Admins: admins, TTL: time.Hour, Assets: assets, Now: e.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	e.h = h
	login := func(key string) (*http.Cookie, sessionInfo) {
		w := do(h, loginRequest(key))
		if w.Code != 200 {
			t.Fatalf("login with %s: %d %s", key, w.Code, w.Body)
		}
		var info sessionInfo
		if err := json.Unmarshal(w.Body.Bytes(), &info); err != nil {
			t.Fatal(err)
		}
		return w.Result().Cookies()[0], info
	}
	vc, vinfo := login(viewerKey)
	if vinfo.Name != "dash" || vinfo.Role != auth.RoleViewer {
		t.Errorf("viewer's login answer: %+v", vinfo)
	}
	ac, ainfo := login(adminKey)
	if ainfo.Name != "admin" || ainfo.Role != auth.RoleAdmin {
		t.Errorf("admin's login answer: %+v", ainfo)
	}
	// The admin API hears who acts, with the role, for reads and changes.
	a, aerr := h.AuthorizeSession(adminRequest(http.MethodGet, vc, ""))
	if aerr != nil || a == nil || *a != (auth.Actor{Name: "dash", Role: auth.RoleViewer, Session: true}) {
		t.Errorf("viewer's session acts as %#v (%v)", a, aerr)
	}
	a, aerr = h.AuthorizeSession(adminRequest(http.MethodPost, ac, ainfo.CSRFToken))
	if aerr != nil || a == nil || *a != (auth.Actor{Name: "admin", Role: auth.RoleAdmin, Session: true}) {
		t.Errorf("admin's session acts as %+v (%v)", a, aerr)
	}
	// The page reads the role back after a reload.
	r := adminRequest(http.MethodGet, vc, "")
	r.URL.Path = "/ui/api/session"
	w := do(h, r)
	var again sessionInfo
	if err := json.Unmarshal(w.Body.Bytes(), &again); err != nil || again.Role != auth.RoleViewer || !again.LoggedIn {
		t.Errorf("session answer for the viewer: %s", w.Body)
	}
	// Taking the viewer's key out of the config ends its sessions only.
	e.h = e.handler(t, adminKey)
	if ok, err := authorized(e.h, adminRequest(http.MethodGet, vc, "")); ok || err == nil || err.Code != "session_expired" {
		t.Errorf("viewer session after its key was removed: %v %v", ok, err)
	}
	if ok, err := authorized(e.h, adminRequest(http.MethodGet, ac, "")); !ok {
		t.Errorf("admin session after the viewer's key was removed: %v", err)
	}
}

func TestLoginWithOnlyNamedKeys(t *testing.T) {
	e := newEnv(t)
	h, err := New(Options{Sessions: e.store, Admins: auth.Admins{{Name: "ops", Role: auth.RoleAdmin, Hash: auth.HashKey("ops-key")}},
		Assets: assets, Now: e.clock.now})
	if err != nil {
		t.Fatal(err)
	}
	if w := do(h, loginRequest("ops-key")); w.Code != 200 {
		t.Errorf("login with a named key and no admin_key: %d %s", w.Code, w.Body)
	}
	if w := do(h, loginRequest(adminKey)); w.Code != 401 {
		t.Errorf("login with an unknown key: %d", w.Code)
	}
}
