// Package openapitest holds gatehouse's HTTP answers to docs/openapi.yaml:
// tests of the admin API (internal/admin) and of the client API
// (internal/server) load the document with Load and pass every answer
// they get to Spec.Check, so the document cannot drift from the code.
//
// It is test support: only _test.go files import it, so it never reaches
// the gatehouse binary. It imports nothing of gatehouse.
//
// The checker understands the part of OpenAPI 3.1 the document uses:
// $ref (with sibling description), allOf (merged into one closed
// object), oneOf (an answer must match one alternative; that no two
// match is not checked), type (one or a list, "null" included),
// properties, required, additionalProperties (false, or a schema for the
// values of a map), items, enum, const, minimum, exclusiveMinimum,
// maximum, minLength and minItems. Anything else in a schema is ignored,
// so keep the document within that. Response keys may be a status, a
// range ("4XX") or "default"; media types may be JSON, server-sent
// events (each event's data checked against the schema, see CheckEvents)
// or anything else (not looked into). A path item's x-method-not-allowed
// extension is the response of the methods it does not take (405).
package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
)

// Spec is a loaded OpenAPI document.
type Spec struct {
	root  map[string]any
	paths map[string]any
	// Headers names the response headers Check holds to the document:
	// names in lower case, and prefixes ending in "-" ("x-gatehouse-").
	// An answer carrying such a header must document it for its
	// response. Nil checks none (documented required headers are checked
	// either way).
	Headers []string
}

// Load reads and parses the document at path.
func Load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse parses a document; it must be OpenAPI 3.1.
func Parse(doc []byte) (*Spec, error) {
	var root map[string]any
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	if v, _ := root["openapi"].(string); !strings.HasPrefix(v, "3.1") {
		return nil, fmt.Errorf("openapi version %q, want 3.1.x", v)
	}
	paths, _ := root["paths"].(map[string]any)
	return &Spec{root: root, paths: paths}, nil
}

// BrokenRefs lists the $refs of the document that lead nowhere.
func (s *Spec) BrokenRefs() []string {
	var broken []string
	var walk func(n any, at string)
	walk = func(n any, at string) {
		switch n := n.(type) {
		case map[string]any:
			if ref, ok := n["$ref"].(string); ok && s.resolve(n) == nil {
				broken = append(broken, at+": "+ref)
			}
			for k, v := range n {
				walk(v, at+"/"+k)
			}
		case []any:
			for i, v := range n {
				walk(v, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(s.root, "#")
	sort.Strings(broken)
	return broken
}

// CheckExamples validates the examples of the document's JSON request
// and response bodies (a media type's example, and the value of each of
// its examples) against their schemas.
func (s *Spec) CheckExamples() []string {
	var problems []string
	check := func(content any, at string) {
		c, _ := content.(map[string]any)
		for mt, m := range c {
			media, _ := m.(map[string]any)
			if mt != "application/json" || media == nil {
				continue
			}
			if ex, ok := media["example"]; ok {
				problems = append(problems, s.validate(media["schema"], jsonValue(ex), at+" example")...)
			}
			exs, _ := media["examples"].(map[string]any)
			for name, ex := range exs {
				if v, ok := s.resolve(ex)["value"]; ok {
					problems = append(problems, s.validate(media["schema"], jsonValue(v), at+" example "+name)...)
				}
			}
		}
	}
	for _, op := range s.Operations() {
		method, tpl, _ := strings.Cut(op, " ")
		o, _ := s.operation(method, tpl)
		check(s.resolve(o["requestBody"])["content"], op+" request")
		responses, _ := o["responses"].(map[string]any)
		for status, r := range responses {
			check(s.resolve(r)["content"], op+" "+status)
		}
	}
	sort.Strings(problems)
	return problems
}

// jsonValue turns a YAML value into what encoding/json would decode from
// the same JSON: numbers become float64.
func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// Operations lists the documented operations as "METHOD /template",
// sorted.
func (s *Spec) Operations() []string {
	var ops []string
	for tpl, item := range s.paths {
		m, _ := item.(map[string]any)
		for method := range m {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				ops = append(ops, strings.ToUpper(method)+" "+tpl)
			}
		}
	}
	sort.Strings(ops)
	return ops
}

// Statuses lists the response keys documented for an operation
// ("200", "4XX", "default" …), sorted.
func (s *Spec) Statuses(method, tpl string) []string {
	op, _ := s.operation(method, tpl)
	responses, _ := op["responses"].(map[string]any)
	out := make([]string, 0, len(responses))
	for k := range responses {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Template returns the documented path a concrete path matches: the same
// number of segments, each equal or a {parameter}. A template matches
// itself.
func (s *Spec) Template(path string) (string, bool) {
	if _, ok := s.paths[path]; ok {
		return path, true
	}
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

func (s *Spec) operation(method, path string) (map[string]any, string) {
	tpl, ok := s.Template(path)
	if !ok {
		return nil, ""
	}
	item, _ := s.paths[tpl].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	return op, tpl
}

// methodNotAllowed is a path's x-method-not-allowed: the documented 405
// of a method the path does not take (nil when it documents none).
func (s *Spec) methodNotAllowed(path string) map[string]any {
	tpl, ok := s.Template(path)
	if !ok {
		return nil
	}
	item, _ := s.paths[tpl].(map[string]any)
	return s.resolve(item["x-method-not-allowed"])
}

// MethodNotAllowed reports whether a documented path documents, in its
// x-method-not-allowed extension, the 405 of the methods it does not take.
func (s *Spec) MethodNotAllowed(tpl string) bool { return s.methodNotAllowed(tpl) != nil }

// resolve follows $ref chains within the document.
func (s *Spec) resolve(node any) map[string]any {
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

// Response returns the documented response of an operation for a status:
// the exact status, else its range ("4XX"), else "default"; the key that
// matched says which. A 405 to a method the path does not take is its
// x-method-not-allowed, if it has one (key "x-method-not-allowed").
func (s *Spec) Response(method, path string, status int) (resp map[string]any, key string) {
	op, _ := s.operation(method, path)
	if op == nil {
		if r := s.methodNotAllowed(path); r != nil && status == 405 {
			return r, "x-method-not-allowed"
		}
		return nil, ""
	}
	responses, _ := op["responses"].(map[string]any)
	for _, k := range []string{strconv.Itoa(status), strconv.Itoa(status/100) + "XX", "default"} {
		if r := s.resolve(responses[k]); r != nil {
			return r, k
		}
	}
	return nil, ""
}

// Check reports how an answer differs from the document: an undocumented
// operation or status, a media type the response does not document, a
// body off its schema, a header of Spec.Headers the response does not
// document, or a documented required header missing. A nil header (or
// one without Content-Type) means a JSON body. Trailers belong in header
// too: the document describes them as headers.
func (s *Spec) Check(method, path string, status int, header http.Header, body []byte) []string {
	op, tpl := s.operation(method, path)
	resp, _ := s.Response(method, path, status)
	if op == nil && resp == nil {
		// A request for what the API does not have gets the router's 404
		// or 405, in the documented error shape.
		if status != 404 && status != 405 || s.methodNotAllowed(path) != nil {
			return []string{fmt.Sprintf("%s %s is not documented, yet answered %d", method, path, status)}
		}
		return s.ValidateJSON("#/components/schemas/Error", body, method+" "+path)
	}
	at := fmt.Sprintf("%s %s %d", method, tpl, status)
	if resp == nil {
		return []string{fmt.Sprintf("%s %s: status %d is not documented", method, tpl, status)}
	}
	problems := s.checkHeaders(resp, header, at)
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(body) > 0 && method != http.MethodHead {
			problems = append(problems, at+": a body, where the document has none")
		}
		return problems
	}
	ct := header.Get("Content-Type")
	if ct == "" {
		ct = "application/json"
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return append(problems, fmt.Sprintf("%s: Content-Type %q: %v", at, ct, err))
	}
	media, ok := content[mt].(map[string]any)
	if !ok {
		return append(problems, fmt.Sprintf("%s: media type %s is not documented", at, mt))
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		problems = append(problems, s.ValidateJSON(media["schema"], body, at)...)
	case mt == "text/event-stream":
		done, _ := media["x-sse-done"].(string)
		problems = append(problems, s.CheckEvents(media["schema"], done, body, at)...)
	}
	return problems
}

// checkHeaders holds the answer's headers to the response's headers.
func (s *Spec) checkHeaders(resp map[string]any, header http.Header, at string) []string {
	documented := map[string]map[string]any{}
	hs, _ := resp["headers"].(map[string]any)
	for name, h := range hs {
		documented[strings.ToLower(name)] = s.resolve(h)
	}
	var problems []string
	for name, h := range documented {
		if req, _ := h["required"].(bool); req && header.Get(name) == "" {
			problems = append(problems, fmt.Sprintf("%s: required header %s is missing", at, name))
		}
	}
	for name := range header {
		lower := strings.ToLower(name)
		if _, ok := documented[lower]; ok || !s.held(lower) {
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: header %s is not documented", at, lower))
	}
	sort.Strings(problems)
	return problems
}

func (s *Spec) held(name string) bool {
	for _, h := range s.Headers {
		if name == h || strings.HasSuffix(h, "-") && strings.HasPrefix(name, h) {
			return true
		}
	}
	return false
}

// CheckRequest reports how a JSON request body differs from the
// operation's documented requestBody.
func (s *Spec) CheckRequest(method, path string, body []byte) []string {
	op, tpl := s.operation(method, path)
	if op == nil {
		return []string{fmt.Sprintf("%s %s is not documented", method, path)}
	}
	rb := s.resolve(op["requestBody"])
	content, _ := rb["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	if media == nil {
		return []string{fmt.Sprintf("%s %s documents no JSON request body", method, tpl)}
	}
	return s.ValidateJSON(media["schema"], body, fmt.Sprintf("%s %s request", method, tpl))
}

// ValidateJSON validates a JSON text against a schema: a schema node of
// the document, or a "#/…" reference to one.
func (s *Spec) ValidateJSON(schema any, body []byte, at string) []string {
	if ref, ok := schema.(string); ok {
		schema = map[string]any{"$ref": ref}
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return []string{fmt.Sprintf("%s: body is not JSON: %v", at, err)}
	}
	return s.validate(schema, v, at)
}

// Event is one server-sent event: its name ("" when it has none) and its
// data, the data lines joined by newlines.
type Event struct {
	Name string
	Data string
}

// Events splits a text/event-stream body into its events, skipping
// comments, ids and retry fields.
func Events(body []byte) []Event {
	var out []Event
	var cur Event
	var data []string
	has := false
	body = bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n"))
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" {
			if has {
				cur.Data = strings.Join(data, "\n")
				out = append(out, cur)
			}
			cur, data, has = Event{}, nil, false
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			cur.Name, has = value, true
		case "data":
			data, has = append(data, value), true
		}
	}
	if has {
		cur.Data = strings.Join(data, "\n")
		out = append(out, cur)
	}
	return out
}

// CheckEvents validates each event of a text/event-stream body: its data
// must be JSON matching schema, but for done (the media type's
// x-sse-done, e.g. "[DONE]"), which may only be the last event. A named
// event's data must carry its name as "type". An empty stream is a
// problem too.
func (s *Spec) CheckEvents(schema any, done string, body []byte, at string) []string {
	events := Events(body)
	if len(events) == 0 {
		return []string{at + ": no events"}
	}
	var problems []string
	for i, e := range events {
		eat := fmt.Sprintf("%s event %d", at, i)
		if done != "" && e.Data == done {
			if i != len(events)-1 {
				problems = append(problems, fmt.Sprintf("%s: %s before the end", eat, done))
			}
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(e.Data), &v); err != nil {
			problems = append(problems, fmt.Sprintf("%s: data is not JSON: %v (%q)", eat, err, e.Data))
			continue
		}
		if e.Name != "" {
			m, _ := v.(map[string]any)
			if typ, _ := m["type"].(string); typ != e.Name {
				problems = append(problems, fmt.Sprintf("%s: event %q carries type %q", eat, e.Name, typ))
			}
		}
		problems = append(problems, s.validate(schema, v, eat)...)
	}
	return problems
}

func (s *Spec) validate(node, v any, at string) []string {
	sc := s.resolve(node)
	if sc == nil {
		if m, ok := node.(map[string]any); ok && m["$ref"] != nil {
			return []string{fmt.Sprintf("%s: $ref %v leads nowhere", at, m["$ref"])}
		}
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
	errs = append(errs, bounds(sc, v, at)...)
	switch v := v.(type) {
	case map[string]any:
		props, _ := sc["properties"].(map[string]any)
		for _, r := range strList(sc["required"]) {
			if _, ok := v[r]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required property %q is missing", at, r))
			}
		}
		extra := sc["additionalProperties"]
		for name, pv := range v {
			ps, ok := props[name]
			switch {
			case ok:
				errs = append(errs, s.validate(ps, pv, at+"."+name)...)
			case extra == false:
				errs = append(errs, fmt.Sprintf("%s: property %q is not documented", at, name))
			case extra != nil && extra != true:
				errs = append(errs, s.validate(extra, pv, at+"."+name)...)
			}
		}
	case []any:
		for i, item := range v {
			errs = append(errs, s.validate(sc["items"], item, fmt.Sprintf("%s[%d]", at, i))...)
		}
	}
	return errs
}

// bounds checks minimum, maximum and exclusiveMinimum of a number,
// minLength of a string and minItems of an array.
func bounds(sc map[string]any, v any, at string) []string {
	var errs []string
	limit := func(key string) (float64, bool) {
		switch n := sc[key].(type) {
		case uint64:
			return float64(n), true
		case int64:
			return float64(n), true
		case float64:
			return n, true
		}
		return 0, false
	}
	switch v := v.(type) {
	case float64:
		if m, ok := limit("minimum"); ok && v < m {
			errs = append(errs, fmt.Sprintf("%s: %v is below the minimum %v", at, v, m))
		}
		if m, ok := limit("exclusiveMinimum"); ok && v <= m {
			errs = append(errs, fmt.Sprintf("%s: %v is not above %v", at, v, m))
		}
		if m, ok := limit("maximum"); ok && v > m {
			errs = append(errs, fmt.Sprintf("%s: %v is above the maximum %v", at, v, m))
		}
	case string:
		if m, ok := limit("minLength"); ok && float64(len([]rune(v))) < m {
			errs = append(errs, fmt.Sprintf("%s: shorter than %v characters", at, m))
		}
	case []any:
		if m, ok := limit("minItems"); ok && float64(len(v)) < m {
			errs = append(errs, fmt.Sprintf("%s: fewer than %v items", at, m))
		}
	}
	return errs
}

// merge folds allOf parts into one closed object schema.
func (s *Spec) merge(parts []any) map[string]any {
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
