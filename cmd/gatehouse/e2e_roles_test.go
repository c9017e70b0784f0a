package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"gatehouse/internal/mockllm"
)

// TestViewerRoleOverHTTP wires the roles as `gatehouse serve` does: a
// viewer key reads the admin API and logs in to the dashboard, and its
// changes are refused, by key and by session alike; an admin's session
// changes things and the audit log names it.
func TestViewerRoleOverHTTP(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	const viewer, ops = "gh-e2e-viewer-key", "gh-e2e-ops-key"
	gw := startGateway(t, dashboardConfig(up, "admin_keys:\n  - {name: dash, key: "+viewer+", role: viewer}\n  - {name: ops, key: "+ops+", role: admin}\n"))
	do := func(method, path, body string, hdr ...string) (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, gw.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp, m
	}
	code := func(m map[string]any) any { e, _ := m["error"].(map[string]any); return e["code"] }

	if resp, m := do("GET", "/admin/keys", "", "Authorization", "Bearer "+viewer); resp.StatusCode != 200 {
		t.Errorf("viewer key reads: %d %v", resp.StatusCode, m)
	}
	if resp, m := do("POST", "/admin/keys", `{"project":"qa"}`, "Authorization", "Bearer "+viewer); resp.StatusCode != 403 || code(m) != "read_only_role" {
		t.Errorf("viewer key creates a key: %d %v", resp.StatusCode, m)
	}
	login := func(key string) (cookie, csrf string) {
		resp, m := do("POST", "/ui/api/login", `{"admin_key":"`+key+`"}`)
		if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
			t.Fatalf("login: %d %v", resp.StatusCode, m)
		}
		return resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value, m["csrf_token"].(string)
	}
	vc, vcsrf := login(viewer)
	if resp, m := do("GET", "/ui/api/session", "", "Cookie", vc); m["role"] != "viewer" || m["name"] != "dash" {
		t.Errorf("viewer's session: %d %v", resp.StatusCode, m)
	}
	if resp, m := do("GET", "/admin/projects", "", "Cookie", vc); resp.StatusCode != 200 {
		t.Errorf("viewer session reads: %d %v", resp.StatusCode, m)
	}
	if resp, m := do("POST", "/admin/projects", `{"name":"by-viewer"}`, "Cookie", vc, "X-CSRF-Token", vcsrf); resp.StatusCode != 403 || code(m) != "read_only_role" {
		t.Errorf("viewer session creates a project: %d %v", resp.StatusCode, m)
	}
	oc, ocsrf := login(ops)
	if resp, m := do("POST", "/admin/projects", `{"name":"by-ops"}`, "Cookie", oc, "X-CSRF-Token", ocsrf); resp.StatusCode != 201 {
		t.Fatalf("admin session creates a project: %d %v", resp.StatusCode, m)
	}
	resp, m := do("GET", "/admin/audit?object_type=project", "", "Authorization", "Bearer "+viewer)
	data, _ := m["data"].([]any)
	if resp.StatusCode != 200 || len(data) != 1 || data[0].(map[string]any)["actor"] != "session:ops" {
		t.Errorf("audit log of projects: %d %v", resp.StatusCode, m)
	}
}
