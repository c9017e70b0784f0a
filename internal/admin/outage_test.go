package admin

import (
	"context"
	"net/http"
	"testing"

	"gatehouse/internal/store/postgres"
	"gatehouse/internal/testservers"
)

// TestStoreDown crashes the PostgreSQL server under the admin API: every
// operation that needs the record store answers 503 store_unavailable in
// the OpenAI shape with a Retry-After (not a 500: the database is away,
// not broken), what needs no store still answers, and once the server is
// back the same calls work again on the same store.
func TestStoreDown(t *testing.T) {
	pg := testservers.StartPostgres(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newEnv(t, st)
	e.run([]step{
		{name: "create project", method: "POST", path: "/admin/projects", body: `{"name":"acme"}`, status: 201, save: map[string]string{"p": "id"}},
		{name: "create key", method: "POST", path: "/admin/keys", body: `{"project":"acme","name":"k"}`, status: 201, save: map[string]string{"k": "id"}},
	})
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	const down = "store_unavailable"
	e.run([]step{
		{name: "create project", method: "POST", path: "/admin/projects", body: `{"name":"other"}`, status: 503, code: down},
		{name: "patch project", method: "PATCH", path: "/admin/projects/{p}", body: `{"rpm":5}`, status: 503, code: down},
		{name: "delete project", method: "DELETE", path: "/admin/projects/{p}", status: 503, code: down},
		{name: "create key", method: "POST", path: "/admin/keys", body: `{"project":"acme","name":"k2"}`, status: 503, code: down},
		{name: "patch key", method: "PATCH", path: "/admin/keys/{k}", body: `{"rpm":5}`, status: 503, code: down},
		{name: "rotate key", method: "POST", path: "/admin/keys/{k}/rotate", status: 503, code: down},
		{name: "revoke key", method: "DELETE", path: "/admin/keys/{k}", status: 503, code: down},
		{name: "create customer", method: "POST", path: "/admin/customers", body: `{"project":"acme","external_id":"u1"}`, status: 503, code: down},
		{name: "set price", method: "PUT", path: "/admin/prices/m", body: `{"input":1,"output":2}`, status: 503, code: down},
		{name: "list keys", method: "GET", path: "/admin/keys", status: 503, code: down},
		{name: "get project", method: "GET", path: "/admin/projects/{p}", status: 503, code: down},
		{name: "usage", method: "GET", path: "/admin/usage", status: 503, code: down},
		{name: "logs", method: "GET", path: "/admin/logs", status: 503, code: down},
		// What needs no store is answered as ever.
		{name: "bad input", method: "POST", path: "/admin/projects", body: `{}`, status: 400, param: "name", code: "missing_field"},
		{name: "patch static key", method: "PATCH", path: "/admin/keys/static:cfg", body: `{"rpm":5}`, status: 403, code: "read_only"},
	})
	req, _ := http.NewRequest("GET", e.srv.URL+"/admin/projects", nil)
	req.Header.Set("Authorization", "Bearer "+adminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("list projects: %d, Retry-After %q; want 503 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	e.run([]step{
		{name: "create project after", method: "POST", path: "/admin/projects", body: `{"name":"other"}`, status: 201},
		{name: "patch key after", method: "PATCH", path: "/admin/keys/{k}", body: `{"rpm":5}`, status: 200},
		{name: "list keys after", method: "GET", path: "/admin/keys", status: 200},
	})
}
