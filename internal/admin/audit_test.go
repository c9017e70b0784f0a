package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
)

type purger struct{}

func (purger) Purge(context.Context, string) (int, error) { return 3, nil }

// withAudit records into the env's own store and serves a cache to purge.
func withAudit(st auth.Store) func(*Options) {
	return func(o *Options) {
		o.Audit = st.(audit.Store)
		o.Cache = purger{}
		withRoles(o)
	}
}

// auditEntries reads the whole log through the API, page by page.
func (e *env) auditEntries(query string) []audit.Entry {
	e.t.Helper()
	var out []audit.Entry
	after := ""
	for {
		path := "/admin/audit?limit=2" + query
		if after != "" {
			path += "&after=" + after
		}
		status, body := e.do("GET", path, "", "Bearer "+viewerKey, "")
		if status != 200 {
			e.t.Fatalf("GET %s: %d %v", path, status, body)
		}
		b, _ := json.Marshal(body)
		var page struct {
			Data      []audit.Entry `json:"data"`
			HasMore   bool          `json:"has_more"`
			NextAfter string        `json:"next_after"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, page.Data...)
		if !page.HasMore {
			return out
		}
		after = page.NextAfter
	}
}

// auditScenario makes one change of every kind and checks each left its
// entry, with the right actor, object and states, and no secret.
func auditScenario(e *env) {
	t := e.t
	var secrets []string
	keep := func(field string) func(t *testing.T, body map[string]any) {
		return func(t *testing.T, body map[string]any) {
			if s, _ := body[field].(string); s != "" {
				secrets = append(secrets, s)
			}
		}
	}
	e.run([]step{
		{name: "create project", method: "POST", path: "/admin/projects", body: `{"name":"audited","rpm":5}`, status: 201, save: map[string]string{"p": "id"}},
		{name: "update project", method: "PATCH", path: "/admin/projects/{p}", key: "Bearer " + opsKey, body: `{"rpm":6}`, status: 200},
		{name: "create key", method: "POST", path: "/admin/keys", body: `{"project":"{p}","name":"k"}`, status: 201, save: map[string]string{"k": "id"}, check: keep("key")},
		{name: "update key", method: "PATCH", path: "/admin/keys/{k}", body: `{"rpm":7}`, status: 200},
		{name: "rotate key", method: "POST", path: "/admin/keys/{k}/rotate", body: `{}`, status: 200, check: keep("key")},
		{name: "revoke key", method: "DELETE", path: "/admin/keys/{k}", status: 200},
		{name: "create customer", method: "POST", path: "/admin/customers", body: `{"project":"{p}","external_id":"c1"}`, status: 201, save: map[string]string{"c": "id"}},
		{name: "update customer", method: "PATCH", path: "/admin/customers/{c}", body: `{"name":"C"}`, status: 200},
		{name: "delete customer", method: "DELETE", path: "/admin/customers/{c}", status: 200},
		{name: "set price", method: "PUT", path: "/admin/prices/gpt-4o", body: `{"input":1,"output":2}`, status: 200},
		{name: "change price", method: "PUT", path: "/admin/prices/gpt-4o", body: `{"input":3,"output":4}`, status: 200},
		{name: "delete price", method: "DELETE", path: "/admin/prices/gpt-4o", status: 200},
		{name: "purge cache", method: "DELETE", path: "/admin/cache?project=audited", status: 200},
		{name: "refused change", method: "PATCH", path: "/admin/projects/{p}", body: `{"rpm":-1}`, status: 400, param: "rpm"},
		{name: "viewer's refused change", method: "DELETE", path: "/admin/cache", key: "Bearer " + viewerKey, status: 403, code: "read_only_role"},
	})
	if len(secrets) != 2 {
		t.Fatalf("issued secrets seen: %d, want 2 (create and rotate)", len(secrets))
	}
	var entries, refusals []audit.Entry
	for _, en := range e.auditEntries("") {
		if en.ObjectType == audit.ObjectAccess {
			refusals = append(refusals, en)
		} else {
			entries = append(entries, en)
		}
	}
	// The viewer's attempt was refused before any handler ran: recorded
	// as such. The 400 was the handler's answer to a change not made.
	if len(refusals) != 1 || refusals[0].Actor != "dash" || refusals[0].Status != 403 {
		t.Errorf("refusal entries: %+v, want the viewer's 403", refusals)
	}
	type want struct{ actor, method, kind, id, before, after string }
	p, k, c := e.vars["p"], e.vars["k"], e.vars["c"]
	wants := []want{
		{"admin", "POST", "project", p, "", `"rpm":5`},
		{"ops", "PATCH", "project", p, `"rpm":5`, `"rpm":6`},
		{"admin", "POST", "key", k, "", `"key":"[redacted]"`},
		{"admin", "PATCH", "key", k, `"rpm":0`, `"rpm":7`},
		{"admin", "POST", "key", k, `"rpm":7`, `"key":"[redacted]"`},
		{"admin", "DELETE", "key", k, `"status":"active"`, `"status":"revoked"`},
		{"admin", "POST", "customer", c, "", `"external_id":"c1"`},
		{"admin", "PATCH", "customer", c, `"external_id":"c1"`, `"name":"C"`},
		{"admin", "DELETE", "customer", c, `"name":"C"`, `"deleted":true`},
		{"admin", "PUT", "price", "gpt-4o", "", `"input":1,`},
		{"admin", "PUT", "price", "gpt-4o", `"input":1,`, `"input":3,`},
		{"admin", "DELETE", "price", "gpt-4o", `"input":3,`, `"deleted":true`},
		{"admin", "DELETE", "cache", "audited", "", `"deleted":3`},
		// A change its handler refused is recorded with the refusal and
		// nothing after it.
		{"admin", "PATCH", "project", p, `"rpm":6`, ""},
	}
	if len(entries) != len(wants) {
		for _, en := range entries {
			t.Logf("entry: %s %s %s %s", en.Actor, en.Method, en.Path, en.ObjectID)
		}
		t.Fatalf("%d audit entries of changes, want %d (one per change, the handler's refusal included)", len(entries), len(wants))
	}
	for i, w := range wants {
		en := entries[i]
		wantStatus := en.Status >= 200 && en.Status < 300
		if i == len(wants)-1 {
			wantStatus = en.Status == 400 && len(en.After) == 0
		}
		if en.Actor != w.actor || en.Method != w.method || en.ObjectType != w.kind || en.ObjectID != w.id || !wantStatus || en.Time.IsZero() {
			t.Errorf("entry %d = %s %s %s %s (%d); want %s %s %s %s", i, en.Actor, en.Method, en.ObjectType, en.ObjectID, en.Status,
				w.actor, w.method, w.kind, w.id)
		}
		if w.before == "" && len(en.Before) != 0 || !strings.Contains(string(en.Before), w.before) {
			t.Errorf("entry %d (%s %s) before = %s; want it to hold %s", i, en.Method, en.Path, en.Before, w.before)
		}
		if !strings.Contains(string(en.After), w.after) {
			t.Errorf("entry %d (%s %s) after = %s; want it to hold %s", i, en.Method, en.Path, en.After, w.after)
		}
		for _, s := range secrets {
			if strings.Contains(string(en.Before)+string(en.After), s) {
				t.Errorf("entry %d holds an issued key", i)
			}
		}
		if en.Role != "admin" {
			t.Errorf("entry %d role %q", i, en.Role)
		}
	}
	// Filters.
	if got := e.auditEntries("&object_type=key"); len(got) != 4 {
		t.Errorf("object_type=key: %d entries, want 4", len(got))
	}
	if got := e.auditEntries("&actor=ops"); len(got) != 1 || got[0].Method != "PATCH" {
		t.Errorf("actor=ops: %+v", got)
	}
	since := entries[3].Time.Format("2006-01-02T15:04:05.999999999Z07:00")
	if got := e.auditEntries("&since=" + since); len(got) == 0 || got[0].Time.Before(entries[3].Time) {
		t.Errorf("since=%s: %d entries starting %v", since, len(got), got)
	}
	if got := e.auditEntries("&until=" + entries[0].Time.Format("2006-01-02T15:04:05.999999999Z07:00")); len(got) != 0 {
		t.Errorf("until the first entry: %d entries, want none", len(got))
	}
	e.run([]step{
		{name: "bad since", method: "GET", path: "/admin/audit?since=yesterday", status: 400, param: "since", code: "invalid_time"},
		{name: "until before since", method: "GET", path: "/admin/audit?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", status: 400, param: "until"},
		{name: "unknown filter", method: "GET", path: "/admin/audit?who=x", status: 400, param: "who", code: "unknown_parameter"},
	})
}

func TestAuditLog(t *testing.T) {
	st := openSQLite(t)
	auditScenario(newEnv(t, st, withAudit(st)))
}

func TestAuditLogPostgres(t *testing.T) {
	st := openPostgres(t)
	auditScenario(newEnv(t, st, withAudit(st)))
}

// A session's changes are recorded as session:<name>.
func TestAuditSessionActor(t *testing.T) {
	st := openSQLite(t)
	e := newEnv(t, st, withAudit(st))
	req, _ := http.NewRequest("POST", e.srv.URL+"/admin/projects", strings.NewReader(`{"name":"by-session"}`))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: "gatehouse_session", Value: "good"})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("create through the session: %d", resp.StatusCode)
	}
	got := e.auditEntries("&actor=session:root")
	if len(got) != 1 || got[0].ObjectType != "project" {
		t.Errorf("session entries: %+v", got)
	}
}

func TestAuditOff(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	e.run([]step{{name: "no audit store", method: "GET", path: "/admin/audit", status: 501, code: "audit_unavailable"}})
}

// Refused attempts are recorded, coalesced per client address and
// minute, naming who tried when the key is known and never the secret
// presented.
func TestAuditRecordsRefusedAttempts(t *testing.T) {
	st := openSQLite(t)
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	e := newEnv(t, st, withAudit(st), func(o *Options) { o.Now = func() time.Time { return now } })
	const guess = "gh-a-wrong-guess-of-the-admin-key"
	e.run([]step{
		{name: "no key", method: "POST", path: "/admin/projects", body: `{"name":"x"}`, key: "-", status: 401},
		{name: "wrong key, same minute", method: "DELETE", path: "/admin/keys/key_1", key: "Bearer " + guess, status: 401},
	})
	now = now.Add(time.Minute)
	e.run([]step{{name: "viewer writes", method: "POST", path: "/admin/projects", body: `{"name":"x"}`, key: "Bearer " + viewerKey, status: 403}})
	now = now.Add(time.Minute)
	e.run([]step{{name: "client key", method: "GET", path: "/admin/keys", key: "Bearer " + clientSecret, status: 403}})

	got := e.auditEntries("&object_type=access")
	type row struct {
		actor, role, method, path string
		status                    int
		refused                   string
		skipped                   int
	}
	var rows []row
	for _, en := range got {
		var after struct {
			Refused string `json:"refused"`
			Source  string `json:"source"`
			Skipped int    `json:"not_recorded_before"`
		}
		if err := json.Unmarshal(en.After, &after); err != nil || after.Source != "127.0.0.1" {
			t.Errorf("entry %s: after %s, want the refusal and its source", en.ID, en.After)
		}
		rows = append(rows, row{en.Actor, en.Role, en.Method, en.Path, en.Status, after.Refused, after.Skipped})
	}
	want := []row{
		{"unknown", "", "POST", "/admin/projects", 401, "missing_admin_key", 0},
		{"dash", "viewer", "POST", "/admin/projects", 403, "read_only_role", 1},
		{"client:static:cfg", "", "GET", "/admin/keys", 403, "insufficient_permissions", 0},
	}
	if diff := cmp.Diff(want, rows, cmp.AllowUnexported(row{})); diff != "" {
		t.Errorf("refusal entries (-want +got):\n%s", diff)
	}
	raw, _ := json.Marshal(e.auditEntries(""))
	for _, secret := range []string{guess, viewerKey, clientSecret} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit log holds a presented secret %q", secret)
		}
	}
}

// brokenAudit fails the writes it is told to fail.
type brokenAudit struct {
	audit.Store
	appendFails, completeFails bool
}

func (b *brokenAudit) AppendAudit(ctx context.Context, e *audit.Entry) error {
	if b.appendFails {
		return errors.New("audit table is full")
	}
	return b.Store.AppendAudit(ctx, e)
}

func (b *brokenAudit) CompleteAudit(ctx context.Context, e *audit.Entry) error {
	if b.completeFails {
		return errors.New("audit table is full")
	}
	return b.Store.CompleteAudit(ctx, e)
}

// A change whose audit entry cannot be written is not made (503); one
// whose entry cannot be completed stays in the log as under way, and the
// gateway says so in its log.
func TestAuditWriteFailure(t *testing.T) {
	st := openSQLite(t)
	broken := &brokenAudit{Store: st.(audit.Store)}
	e := newEnv(t, st, withAudit(st), func(o *Options) { o.Audit = broken })
	e.run([]step{{name: "project", method: "POST", path: "/admin/projects", body: `{"name":"a1","rpm":1}`, status: 201,
		save: map[string]string{"p": "id"}}})

	broken.appendFails = true
	e.run([]step{
		{name: "create refused", method: "POST", path: "/admin/projects", body: `{"name":"a2"}`, status: 503, code: "audit_unavailable"},
		{name: "update refused", method: "PATCH", path: "/admin/projects/{p}", body: `{"rpm":9}`, status: 503, code: "audit_unavailable"},
		{name: "key not created", method: "POST", path: "/admin/keys", body: `{"project":"a1"}`, status: 503, code: "audit_unavailable"},
	})
	broken.appendFails = false
	e.run([]step{
		{name: "nothing was created", method: "GET", path: "/admin/projects?limit=100", status: 200, check: func(t *testing.T, b map[string]any) {
			for _, p := range b["data"].([]any) {
				if p.(map[string]any)["name"] == "a2" {
					t.Errorf("a project was created though its audit entry failed: %v", p)
				}
			}
		}},
		{name: "nothing was changed", method: "GET", path: "/admin/projects/{p}", status: 200, check: func(t *testing.T, b map[string]any) {
			wantField(t, b, "rpm", 1)
		}},
		{name: "no key", method: "GET", path: "/admin/keys", status: 200, check: func(t *testing.T, b map[string]any) {
			for _, k := range b["data"].([]any) {
				if k.(map[string]any)["project_id"] == e.vars["p"] {
					t.Errorf("a key was created though its audit entry failed: %v", k)
				}
			}
		}},
	})

	broken.completeFails = true
	e.run([]step{{name: "update", method: "PATCH", path: "/admin/projects/{p}", body: `{"rpm":2}`, status: 200}})
	broken.completeFails = false
	var last audit.Entry
	for _, en := range e.auditEntries("&object_type=project") {
		last = en
	}
	if last.Method != "PATCH" || last.Status != 0 || !strings.Contains(string(last.Before), `"rpm":1`) {
		t.Errorf("the change whose entry could not be completed: %+v, want it under way (status 0) with its before", last)
	}
	if !strings.Contains(e.logs.String(), "audit entry not completed") {
		t.Errorf("nothing logged about the entry left incomplete:\n%s", e.logs)
	}
}
