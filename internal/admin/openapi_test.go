package admin

import (
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"gatehouse/internal/auth"
	"gatehouse/internal/openapitest"
)

// The document is held to the handlers by internal/openapitest's
// checker; admin_test.go passes every answer of its scenarios to it.

var (
	specOnce sync.Once
	spec     *openapitest.Spec
	specErr  error
)

func loadSpec(t testing.TB) *openapitest.Spec {
	t.Helper()
	specOnce.Do(func() { spec, specErr = openapitest.Load("../../docs/openapi.yaml") })
	if specErr != nil {
		t.Fatalf("docs/openapi.yaml: %v", specErr)
	}
	return spec
}

// TestOpenAPIRoutes checks that the document and the router agree: every
// documented operation is served, and every served one documented.
func TestOpenAPIRoutes(t *testing.T) {
	s := loadSpec(t)
	h := New(Options{Store: nil, AdminKey: auth.HashKey(adminKey)})
	documented := map[string]bool{}
	for _, op := range s.Operations() {
		if _, tpl, _ := strings.Cut(op, " "); strings.HasPrefix(tpl, "/admin/") {
			documented[op] = true
		}
	}
	served := map[string]bool{}
	for _, rt := range h.routes() {
		served[rt.method+" "+rt.pattern] = true
	}
	for op := range documented {
		if !served[op] {
			t.Errorf("documented but not served: %s", op)
		}
	}
	for op := range served {
		if !documented[op] {
			t.Errorf("served but not documented: %s", op)
		}
	}
	// And the mux really routes each documented operation (a concrete
	// path for each template) rather than answering 404 or 405.
	for op := range documented {
		method, tpl, _ := strings.Cut(op, " ")
		path := strings.NewReplacer("{id}", "x", "{model}", "m", "{request_id}", "gh-1").Replace(tpl)
		req := httptest.NewRequest(method, path, nil)
		if _, pattern := h.mux.Handler(req); pattern != op {
			t.Errorf("%s %s routes to %q, want %q", method, path, pattern, op)
		}
	}
}

// TestCheckerCatches makes sure the checker is not vacuous.
func TestCheckerCatches(t *testing.T) {
	s := loadSpec(t)
	good := `{"id":"proj_1","name":"a","rpm":0,"tpm":0,"log_bodies":false,"read_only":false,"created_at":"x","updated_at":"x"}`
	if p := s.Check("GET", "/admin/projects/proj_1", 200, nil, []byte(good)); len(p) != 0 {
		t.Fatalf("good body rejected: %v", p)
	}
	for name, c := range map[string]struct {
		method, path string
		status       int
		body         string
	}{
		"undocumented status":    {"GET", "/admin/projects/proj_1", 418, `{}`},
		"undocumented operation": {"PUT", "/admin/keys", 200, `{}`},
		"missing required":       {"GET", "/admin/projects/proj_1", 200, `{"id":"proj_1"}`},
		"extra property":         {"GET", "/admin/projects/proj_1", 200, good[:len(good)-1] + `,"secret":"x"}`},
		"wrong type":             {"GET", "/admin/projects/proj_1", 200, strings.Replace(good, `"rpm":0`, `"rpm":"0"`, 1)},
		"list item off schema":   {"GET", "/admin/keys", 200, `{"object":"list","data":[{"id":"k"}],"has_more":false}`},
		"secret missing":         {"POST", "/admin/keys", 201, `{"id":"k"}`},
		"error shape":            {"GET", "/admin/keys/x", 404, `{"message":"no"}`},
	} {
		if p := s.Check(c.method, c.path, c.status, nil, []byte(c.body)); len(p) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}
