package admin

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/goccy/go-yaml"

	"gatehouse/internal/auth"
)

// The checker below holds the API to docs/openapi.yaml. It understands
// the part of OpenAPI 3.1 the document uses: $ref, allOf (merged),
// oneOf, type (one or a list), properties, required,
// additionalProperties: false, items, enum and const. Anything else in a
// schema is ignored, so keep the document within that.

type apiSpec struct {
	root  map[string]any
	paths map[string]any
}

var (
	specOnce sync.Once
	spec     *apiSpec
	specErr  error
)

func loadSpec(t *testing.T) *apiSpec {
	t.Helper()
	specOnce.Do(func() {
		b, err := os.ReadFile("../../docs/openapi.yaml")
		if err != nil {
			specErr = err
			return
		}
		var root map[string]any
		if err := yaml.Unmarshal(b, &root); err != nil {
			specErr = err
			return
		}
		if v, _ := root["openapi"].(string); !strings.HasPrefix(v, "3.1") {
			specErr = fmt.Errorf("openapi version %q, want 3.1.x", v)
			return
		}
		paths, _ := root["paths"].(map[string]any)
		spec = &apiSpec{root: root, paths: paths}
	})
	if specErr != nil {
		t.Fatalf("docs/openapi.yaml: %v", specErr)
	}
	return spec
}

// resolve follows $ref chains within the document.
func (s *apiSpec) resolve(node any) map[string]any {
	m, _ := node.(map[string]any)
	for m != nil {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = s.root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cm, _ := cur.(map[string]any)
			cur = cm[part]
		}
		m, _ = cur.(map[string]any)
	}
	return m
}

// template finds the documented path a concrete path matches.
func (s *apiSpec) template(path string) (string, bool) {
	segs := strings.Split(path, "/")
	for tpl := range s.paths {
		ts := strings.Split(tpl, "/")
		if len(ts) != len(segs) {
			continue
		}
		ok := true
		for i := range ts {
			if ts[i] != segs[i] && !(strings.HasPrefix(ts[i], "{") && segs[i] != "") {
				ok = false
				break
			}
		}
		if ok {
			return tpl, true
		}
	}
	return "", false
}

func (s *apiSpec) operation(method, path string) (map[string]any, string) {
	tpl, ok := s.template(path)
	if !ok {
		return nil, ""
	}
	item, _ := s.paths[tpl].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	return op, tpl
}

// checkResponse reports how a response differs from the document: an
// undocumented operation or status, or a body off its schema.
func (s *apiSpec) checkResponse(method, path string, status int, body []byte) []string {
	op, tpl := s.operation(method, path)
	if op == nil {
		// A request for what the API does not have gets the router's 404
		// or 405, in the documented error shape.
		if status != 404 && status != 405 {
			return []string{fmt.Sprintf("%s %s is not documented, yet answered %d", method, path, status)}
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return []string{fmt.Sprintf("%s %s %d: body is not JSON: %v", method, path, status, err)}
		}
		return s.validate(map[string]any{"$ref": "#/components/schemas/Error"}, v, method+" "+path)
	}
	responses, _ := op["responses"].(map[string]any)
	resp := s.resolve(responses[strconv.Itoa(status)])
	if resp == nil {
		return []string{fmt.Sprintf("%s %s: status %d is not documented", method, tpl, status)}
	}
	content, _ := resp["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	if media == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return []string{fmt.Sprintf("%s %s %d: body is not JSON: %v", method, tpl, status, err)}
	}
	return s.validate(media["schema"], v, fmt.Sprintf("%s %s %d", method, tpl, status))
}

func (s *apiSpec) validate(node, v any, at string) []string {
	sc := s.resolve(node)
	if sc == nil {
		return nil
	}
	if parts, ok := sc["allOf"].([]any); ok {
		sc = s.merge(parts)
	}
	if alts, ok := sc["oneOf"].([]any); ok {
		var errs []string
		for _, a := range alts {
			e := s.validate(a, v, at)
			if len(e) == 0 {
				return nil
			}
			errs = append(errs, e...)
		}
		return append([]string{at + ": matches no oneOf alternative"}, errs...)
	}
	if types := typesOf(sc["type"]); len(types) > 0 && !slices.Contains(types, jsonType(v)) &&
		!(jsonType(v) == "integer" && slices.Contains(types, "number")) {
		return []string{fmt.Sprintf("%s: %s, want %v", at, jsonType(v), types)}
	}
	var errs []string
	if enum, ok := sc["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return same(e, v) }) {
		errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", at, v, enum))
	}
	if c, ok := sc["const"]; ok && !same(c, v) {
		errs = append(errs, fmt.Sprintf("%s: %v, want %v", at, v, c))
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := sc["properties"].(map[string]any)
		for _, r := range strList(sc["required"]) {
			if _, ok := v[r]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required property %q is missing", at, r))
			}
		}
		closed := sc["additionalProperties"] == false
		for name, pv := range v {
			ps, ok := props[name]
			if !ok {
				if closed {
					errs = append(errs, fmt.Sprintf("%s: property %q is not documented", at, name))
				}
				continue
			}
			errs = append(errs, s.validate(ps, pv, at+"."+name)...)
		}
	case []any:
		for i, item := range v {
			errs = append(errs, s.validate(sc["items"], item, fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return errs
}

// merge folds allOf parts into one object schema.
func (s *apiSpec) merge(parts []any) map[string]any {
	props := map[string]any{}
	var required []any
	for _, p := range parts {
		ps := s.resolve(p)
		if pp, ok := ps["properties"].(map[string]any); ok {
			for k, v := range pp {
				props[k] = v
			}
		}
		for _, r := range strList(ps["required"]) {
			required = append(required, r)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

func typesOf(t any) []string {
	if s, ok := t.(string); ok {
		return []string{s}
	}
	return strList(t)
}

func strList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		} else if x == nil {
			out = append(out, "null")
		}
	}
	return out
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == math.Trunc(v) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// same compares a YAML value with a JSON one (numbers decode differently).
func same(a, b any) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// TestOpenAPIRoutes checks that the document and the router agree: every
// documented operation is served, and every served one documented.
func TestOpenAPIRoutes(t *testing.T) {
	s := loadSpec(t)
	h := New(Options{Store: nil, AdminKey: auth.HashKey(adminKey)})
	documented := map[string]bool{}
	for tpl, item := range s.paths {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "post", "patch", "delete", "put":
				documented[strings.ToUpper(method)+" "+tpl] = true
			}
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
	if p := s.checkResponse("GET", "/admin/projects/proj_1", 200, []byte(good)); len(p) != 0 {
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
		if p := s.checkResponse(c.method, c.path, c.status, []byte(c.body)); len(p) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}
