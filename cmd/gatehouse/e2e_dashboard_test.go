package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// dashboardConfig is a gateway with the admin key, so the dashboard is on.
func dashboardConfig(up *upstream, extra string) string {
	return baseConfig(up, "admin_key: "+testAdminKey+"\n"+extra)
}

// TestDashboardInBrowser drives the dashboard in Debian's Chromium with
// playwright-core (web/e2e/dashboard.mjs says what it walks through).
// make test installs both (scripts/test-services, make ui-deps); without
// them this test fails and says how to get them.
func TestDashboardInBrowser(t *testing.T) {
	chromium := os.Getenv("GATEHOUSE_TEST_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no Chromium at %s: make test installs it (scripts/test-services start), or set GATEHOUSE_TEST_CHROMIUM", chromium)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("no node on PATH: the dashboard's browser test runs on Node.js 20.19 or newer")
	}
	web, _ := filepath.Abs("../../web")
	if _, err := os.Stat(filepath.Join(web, "node_modules", "playwright-core")); err != nil {
		t.Fatal("web/node_modules has no playwright-core: run make ui-deps (make test does)")
	}
	out := os.Getenv("GATEHOUSE_TEST_OUT")
	if out == "" {
		out = filepath.Join(web, "test-results")
	}
	out = filepath.Join(out, "screenshots")

	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, dashboardConfig(up, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "e2e/dashboard.mjs")
	cmd.Dir = web
	cmd.Env = append(os.Environ(), "GATEHOUSE_URL="+gw.URL, "ADMIN_KEY="+testAdminKey, "MODEL=chat", "PROJECT=qa",
		"OUT_DIR="+out, "CHROMIUM="+chromium)
	b, err := cmd.CombinedOutput()
	t.Logf("browser walk-through (screenshots in %s):\n%s", out, b)
	if err != nil {
		t.Fatalf("the dashboard's browser walk-through failed: %v", err)
	}
	if !strings.Contains(string(b), "dashboard: passed") {
		t.Fatal("the walk-through ended without saying it passed")
	}
}

// TestDashboardSessionOverHTTP is the session as the gateway serves it:
// the cookie opens the admin API, a change needs the CSRF token, and the
// dashboard can be turned off.
func TestDashboardSessionOverHTTP(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, dashboardConfig(up, ""))
	do := func(method, path, body string, hdr ...string) (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, gw.URL+path, strings.NewReader(body))
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
	if resp, _ := do("GET", "/ui/", ""); resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("GET /ui/: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, m := do("POST", "/ui/api/login", `{"admin_key":"wrong"}`); resp.StatusCode != 401 {
		t.Fatalf("wrong key: %d %v", resp.StatusCode, m)
	}
	resp, m := do("POST", "/ui/api/login", `{"admin_key":"`+testAdminKey+`"}`)
	if resp.StatusCode != 200 || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d %v", resp.StatusCode, m)
	}
	cookie, csrf := resp.Cookies()[0].Name+"="+resp.Cookies()[0].Value, m["csrf_token"].(string)

	if resp, m := do("GET", "/admin/keys", "", "Cookie", cookie); resp.StatusCode != 200 || m["object"] != "list" {
		t.Errorf("GET /admin/keys with the session: %d %v", resp.StatusCode, m)
	}
	body := `{"name":"from-the-ui"}`
	if resp, m := do("POST", "/admin/projects", body, "Cookie", cookie, "Content-Type", "application/json"); resp.StatusCode != 403 {
		t.Errorf("a change without the CSRF token: %d %v", resp.StatusCode, m)
	}
	if resp, m := do("POST", "/admin/projects", body, "Cookie", cookie, "Content-Type", "application/json", "X-CSRF-Token", csrf,
		"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"); resp.StatusCode != 403 {
		t.Errorf("a cross-site change: %d %v", resp.StatusCode, m)
	}
	if resp, m := do("POST", "/admin/projects", body, "Cookie", cookie, "Content-Type", "application/json", "X-CSRF-Token", csrf,
		"Sec-Fetch-Site", "same-origin"); resp.StatusCode != 201 {
		t.Errorf("a change with the CSRF token: %d %v", resp.StatusCode, m)
	}
	if resp, _ := do("POST", "/ui/api/logout", "", "Cookie", cookie, "X-CSRF-Token", csrf); resp.StatusCode != 204 {
		t.Errorf("logout: %d", resp.StatusCode)
	}
	if resp, m := do("GET", "/admin/keys", "", "Cookie", cookie); resp.StatusCode != 401 {
		t.Errorf("GET /admin/keys after logout: %d %v", resp.StatusCode, m)
	}

	off := startGateway(t, dashboardConfig(up, "ui: {enabled: false}\n"))
	resp, err := http.Get(off.URL + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /ui/ with ui.enabled false: %d", resp.StatusCode)
	}
}
