package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gatehouse/internal/openapitest"
)

// TestAnswersMatchTheDocument holds every answer of /ui/api/… to
// docs/openapi.yaml, and every status the document lists for them to an
// answer that gives it.
func TestAnswersMatchTheDocument(t *testing.T) {
	spec, err := openapitest.Load("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	seen := map[string]bool{}
	check := func(r *http.Request) *httptest.ResponseRecorder {
		t.Helper()
		w := do(e.h, r)
		for _, p := range spec.Check(r.Method, r.URL.Path, w.Code, w.Header(), w.Body.Bytes()) {
			t.Errorf("openapi: %s (body %s)", p, w.Body)
		}
		if tpl, ok := spec.Template(r.URL.Path); ok {
			seen[r.Method+" "+tpl+" "+strconv.Itoa(w.Code)] = true
		}
		return w
	}
	get := func(path string, c *http.Cookie) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "http://gw.test"+path, nil)
		if c != nil {
			r.AddCookie(c)
		}
		return r
	}
	logout := func(c *http.Cookie, csrf string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://gw.test/ui/api/logout", nil)
		if c != nil {
			r.AddCookie(c)
		}
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		if csrf != "" {
			r.Header.Set(CSRFHeader, csrf)
		}
		return r
	}

	check(get("/ui/api/session", nil))
	check(get("/ui/api/openapi.json", nil))
	check(loginRequest("")) // 400
	big := loginRequest(adminKey)
	big.Body = io.NopCloser(strings.NewReader(`{"admin_key":"` + strings.Repeat("x", maxLoginBody) + `"}`))
	check(big) // 413
	cross := loginRequest(adminKey)
	cross.Header.Set("Sec-Fetch-Site", "cross-site")
	check(cross) // 403
	w := check(loginRequest(adminKey))
	c := w.Result().Cookies()[0]
	var csrf string
	if i := strings.Index(w.Body.String(), `"csrf_token":"`); i >= 0 {
		rest := w.Body.String()[i+len(`"csrf_token":"`):]
		csrf = rest[:strings.IndexByte(rest, '"')]
	}
	check(get("/ui/api/session", c))
	check(logout(c, ""))   // 403: no CSRF token
	check(logout(c, csrf)) // 204
	check(logout(c, csrf)) // 401: ended
	check(httptest.NewRequest(http.MethodGet, "http://gw.test/ui/api/login", nil))
	for range maxFailures {
		check(loginRequest("gh-wrong")) // 401
	}
	check(loginRequest(adminKey)) // 429

	for _, op := range spec.Operations() {
		method, tpl, _ := strings.Cut(op, " ")
		if !strings.HasPrefix(tpl, "/ui/") {
			continue
		}
		for _, status := range spec.Statuses(method, tpl) {
			if !seen[op+" "+status] {
				t.Errorf("documented, never answered: %s %s", op, status)
			}
		}
	}
	if !slices.ContainsFunc(spec.Operations(), func(op string) bool { return strings.HasSuffix(op, " /ui/api/login") }) {
		t.Error("the document has no /ui/api/login")
	}
}
