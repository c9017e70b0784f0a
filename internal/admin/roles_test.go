package admin

import (
	"net/http"
	"testing"

	"gatehouse/internal/auth"
)

const (
	opsKey    = "ops-admin-secret"
	viewerKey = "dash-viewer-secret"
)

func withRoles(o *Options) {
	o.Admins = auth.Admins{
		{Name: "ops", Role: auth.RoleAdmin, Hash: auth.HashKey(opsKey)},
		{Name: "dash", Role: auth.RoleViewer, Hash: auth.HashKey(viewerKey)},
	}
	o.Sessions = sessions{}
}

// Every credential may read; only the admin role may change anything,
// whether it comes with its key or through a dashboard session.
func TestRoles(t *testing.T) {
	e := newEnv(t, openSQLite(t), withRoles)
	e.run([]step{
		{name: "admin_key reads", method: "GET", path: "/admin/projects", status: 200},
		{name: "admin_key writes", method: "POST", path: "/admin/projects", body: `{"name":"by-root"}`, status: 201, save: map[string]string{"p": "id"}},
		{name: "named admin reads", method: "GET", path: "/admin/keys", key: "Bearer " + opsKey, status: 200},
		{name: "named admin writes", method: "POST", path: "/admin/projects", key: "Bearer " + opsKey, body: `{"name":"by-ops"}`, status: 201},
		{name: "viewer reads a list", method: "GET", path: "/admin/projects", key: "Bearer " + viewerKey, status: 200},
		{name: "viewer reads one", method: "GET", path: "/admin/projects/{p}", key: "Bearer " + viewerKey, status: 200},
		{name: "viewer may not create", method: "POST", path: "/admin/projects", key: "Bearer " + viewerKey, body: `{"name":"by-dash"}`,
			status: 403, code: "read_only_role", msg: `"dash" has the role viewer`},
		{name: "viewer may not create keys", method: "POST", path: "/admin/keys", key: "Bearer " + viewerKey, body: `{"project":"{p}"}`,
			status: 403, code: "read_only_role"},
		{name: "viewer may not delete", method: "DELETE", path: "/admin/projects/{p}", key: "Bearer " + viewerKey, status: 403, code: "read_only_role"},
		{name: "viewer may not purge", method: "DELETE", path: "/admin/cache", key: "Bearer " + viewerKey, status: 403, code: "read_only_role"},
		{name: "nothing was made by the viewer", method: "GET", path: "/admin/projects/by-dash", status: 404},
	})
	// Sessions carry their credential's role.
	do := func(method, cookie string) int {
		req, _ := http.NewRequest(method, e.srv.URL+"/admin/customers", nil)
		if method == "POST" {
			req.Body = http.NoBody
		}
		req.AddCookie(&http.Cookie{Name: "gatehouse_session", Value: cookie})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := do("GET", "viewer"); s != 200 {
		t.Errorf("viewer session read: %d", s)
	}
	if s := do("POST", "viewer"); s != 403 {
		t.Errorf("viewer session write: %d, want 403", s)
	}
	if s := do("POST", "good"); s != 400 { // reaches the endpoint: an empty body is a bad request
		t.Errorf("admin session write: %d, want 400 from the endpoint", s)
	}
}
