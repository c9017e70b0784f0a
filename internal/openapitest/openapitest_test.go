package openapitest

import (
	"net/http"
	"strings"
	"testing"
)

// doc is a small document using every feature the checker understands.
const doc = `
openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /things/{id}:
    x-method-not-allowed: {$ref: "#/components/responses/NotAllowed"}
    post:
      requestBody:
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Input"}
            example: {name: a, count: 1}
      responses:
        "200":
          description: ok
          headers:
            x-id: {$ref: "#/components/headers/id"}
            x-extra: {schema: {type: string}}
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Thing"}
            text/event-stream:
              schema: {$ref: "#/components/schemas/Event"}
              x-sse-done: "[DONE]"
        "404":
          description: gone
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Error"}
        4XX: {$ref: "#/components/responses/Problem"}
  /plain:
    get:
      responses:
        "200":
          description: text
          content:
            text/plain:
              schema: {type: string}
components:
  headers:
    id: {required: true, schema: {type: string}}
  responses:
    Problem:
      description: p
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    NotAllowed:
      description: n
      headers:
        Allow: {required: true, schema: {type: string}}
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
  schemas:
    Input:
      type: object
      additionalProperties: false
      required: [name]
      properties:
        name: {type: string, minLength: 1}
        count: {type: [integer, "null"], minimum: 1, maximum: 9}
        ratio: {type: number, exclusiveMinimum: 0}
        tags: {type: array, minItems: 1, items: {type: string}}
        labels: {type: object, additionalProperties: {type: string}}
    Thing:
      allOf:
        - {$ref: "#/components/schemas/Input"}
        - type: object
          required: [id]
          properties:
            id: {type: string}
            kind: {type: string, enum: [a, b]}
            shape: {oneOf: [{type: string, const: round}, {type: integer}]}
    Event:
      oneOf:
        - type: object
          required: [type, n]
          properties:
            type: {type: string, const: tick}
            n: {type: integer}
        - {$ref: "#/components/schemas/Error"}
    Error:
      type: object
      additionalProperties: false
      required: [error]
      properties:
        error: {type: string}
`

func parse(t *testing.T) *Spec {
	t.Helper()
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s.Headers = []string{"x-", "allow"}
	return s
}

// TestCheckerCatches: each way an answer can be off the document is
// reported, and a right answer is not.
func TestCheckerCatches(t *testing.T) {
	s := parse(t)
	okHeader := http.Header{"X-Id": {"1"}, "Content-Type": {"application/json"}}
	sse := http.Header{"X-Id": {"1"}, "Content-Type": {"text/event-stream; charset=utf-8"}}
	good := []struct {
		method, path string
		status       int
		header       http.Header
		body         string
	}{
		{"POST", "/things/1", 200, okHeader, `{"id":"1","name":"a","count":null,"kind":"a","shape":"round","labels":{"x":"y"}}`},
		{"POST", "/things/1", 200, sse, "event: tick\ndata: {\"type\":\"tick\",\"n\":1}\n\ndata: {\"error\":\"late\"}\n\ndata: [DONE]\n\n"},
		{"POST", "/things/1", 404, nil, `{"error":"no"}`},
		{"POST", "/things/1", 422, nil, `{"error":"range"}`},
		{"GET", "/things/1", 405, http.Header{"Allow": {"POST"}}, `{"error":"method"}`},
		{"GET", "/plain", 200, http.Header{"Content-Type": {"text/plain; version=0.0.4"}}, "anything"},
		{"GET", "/nowhere", 404, nil, `{"error":"no route"}`},
	}
	for _, c := range good {
		if p := s.Check(c.method, c.path, c.status, c.header, []byte(c.body)); len(p) != 0 {
			t.Errorf("%s %s %d rejected: %v", c.method, c.path, c.status, p)
		}
	}
	thing := func(mod string) string { return `{"id":"1","name":"a"` + mod + `}` }
	for name, c := range map[string]struct {
		method, path string
		status       int
		header       http.Header
		body         string
	}{
		"undocumented status":           {"POST", "/things/1", 302, okHeader, thing("")},
		"undocumented operation":        {"PUT", "/plain", 200, nil, `{}`},
		"405 without its extension":     {"DELETE", "/plain", 405, nil, `{"message":"no"}`},
		"404 to an operation's path":    {"GET", "/things/1", 404, nil, `{"error":"no"}`},
		"missing required":              {"POST", "/things/1", 200, okHeader, `{"id":"1"}`},
		"extra property of an allOf":    {"POST", "/things/1", 200, okHeader, thing(`,"secret":1`)},
		"wrong type":                    {"POST", "/things/1", 200, okHeader, thing(`,"count":"1"`)},
		"below minimum":                 {"POST", "/things/1", 200, okHeader, thing(`,"count":0`)},
		"above maximum":                 {"POST", "/things/1", 200, okHeader, thing(`,"count":10`)},
		"not above exclusiveMinimum":    {"POST", "/things/1", 200, okHeader, thing(`,"ratio":0`)},
		"too short":                     {"POST", "/things/1", 200, okHeader, `{"id":"1","name":""}`},
		"too few items":                 {"POST", "/things/1", 200, okHeader, thing(`,"tags":[]`)},
		"map value off schema":          {"POST", "/things/1", 200, okHeader, thing(`,"labels":{"x":1}`)},
		"not in enum":                   {"POST", "/things/1", 200, okHeader, thing(`,"kind":"c"`)},
		"no oneOf alternative":          {"POST", "/things/1", 200, okHeader, thing(`,"shape":"square"`)},
		"not JSON":                      {"POST", "/things/1", 200, okHeader, `{`},
		"required header missing":       {"POST", "/things/1", 200, http.Header{"Content-Type": {"application/json"}}, thing("")},
		"undocumented held header":      {"POST", "/things/1", 200, http.Header{"X-Id": {"1"}, "X-Other": {"1"}}, thing("")},
		"undocumented media type":       {"POST", "/things/1", 200, http.Header{"X-Id": {"1"}, "Content-Type": {"text/html"}}, "<p>"},
		"range response off schema":     {"POST", "/things/1", 409, nil, `{"message":"x"}`},
		"405 without Allow":             {"GET", "/things/1", 405, nil, `{"error":"method"}`},
		"event off schema":              {"POST", "/things/1", 200, sse, "data: {\"type\":\"tick\",\"n\":\"one\"}\n\n"},
		"event name is not its type":    {"POST", "/things/1", 200, sse, "event: tock\ndata: {\"type\":\"tick\",\"n\":1}\n\n"},
		"done before the end":           {"POST", "/things/1", 200, sse, "data: [DONE]\n\ndata: {\"type\":\"tick\",\"n\":1}\n\n"},
		"event data not JSON":           {"POST", "/things/1", 200, sse, "data: tick\n\n"},
		"no events":                     {"POST", "/things/1", 200, sse, ": just a comment\n\n"},
		"unknown path, wrong error":     {"GET", "/nowhere", 404, nil, `{"message":"no"}`},
		"unknown path, unexpected code": {"GET", "/nowhere", 200, nil, `{}`},
	} {
		if p := s.Check(c.method, c.path, c.status, c.header, []byte(c.body)); len(p) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}

func TestCheckRequest(t *testing.T) {
	s := parse(t)
	if p := s.CheckRequest("POST", "/things/1", []byte(`{"name":"a","count":3}`)); len(p) != 0 {
		t.Errorf("good request rejected: %v", p)
	}
	for _, body := range []string{`{"count":3}`, `{"name":"a","other":1}`, `[]`} {
		if p := s.CheckRequest("POST", "/things/1", []byte(body)); len(p) == 0 {
			t.Errorf("%s: not caught", body)
		}
	}
	if p := s.CheckRequest("GET", "/plain", []byte(`{}`)); len(p) == 0 {
		t.Error("a request body where none is documented: not caught")
	}
}

func TestEvents(t *testing.T) {
	got := Events([]byte(": comment\r\nevent: a\r\ndata: {\"x\":\r\ndata: 1}\r\nid: 7\r\n\r\ndata: [DONE]"))
	if len(got) != 2 || got[0] != (Event{Name: "a", Data: "{\"x\":\n1}"}) || got[1] != (Event{Data: "[DONE]"}) {
		t.Fatalf("events %+v", got)
	}
}

func TestStatusesAndOperations(t *testing.T) {
	s := parse(t)
	if got := strings.Join(s.Operations(), ","); got != "GET /plain,POST /things/{id}" {
		t.Errorf("operations %s", got)
	}
	if got := strings.Join(s.Statuses("POST", "/things/{id}"), ","); got != "200,404,4XX" {
		t.Errorf("statuses %s", got)
	}
	if !s.MethodNotAllowed("/things/{id}") || s.MethodNotAllowed("/plain") {
		t.Error("MethodNotAllowed")
	}
}

func TestBrokenRefsAndExamples(t *testing.T) {
	s := parse(t)
	if b := s.BrokenRefs(); len(b) != 0 {
		t.Errorf("broken refs in a sound document: %v", b)
	}
	if p := s.CheckExamples(); len(p) != 0 {
		t.Errorf("good example rejected: %v", p)
	}
	bad, err := Parse([]byte(strings.Replace(strings.Replace(doc, "example: {name: a, count: 1}", "example: {count: 0}", 1),
		`"#/components/schemas/Thing"`, `"#/components/schemas/Nothing"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if b := bad.BrokenRefs(); len(b) != 1 {
		t.Errorf("broken refs %v, want the one to Nothing", b)
	}
	if p := bad.CheckExamples(); len(p) < 2 {
		t.Errorf("example problems %v, want a missing name and a count below its minimum", p)
	}
	if p := bad.Check("POST", "/things/1", 200, http.Header{"X-Id": {"1"}}, []byte(`{}`)); len(p) == 0 {
		t.Error("a body checked against a $ref that leads nowhere passed")
	}
}

// TestDocument holds the real document to what the checker cannot see
// from answers: every $ref resolves and every example fits its schema.
func TestDocument(t *testing.T) {
	s, err := Load("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range s.BrokenRefs() {
		t.Errorf("$ref leads nowhere: %s", b)
	}
	for _, p := range s.CheckExamples() {
		t.Errorf("example: %s", p)
	}
	if len(s.Operations()) < 30 {
		t.Errorf("only %d operations: is the document read right?", len(s.Operations()))
	}
}
