package admin

import (
	"testing"
)

// FuzzBodies sends arbitrary bodies to every admin operation that takes
// one, creating and changing keys, projects, customers and prices: each
// is answered with a success or a 4xx error, as docs/openapi.yaml says
// (env.do holds every answer to it), never a 5xx or a panic.
func FuzzBodies(f *testing.F) {
	e := newEnv(f, openSQLite(f))
	f.Add(0, `{"name":"acme","labels":{"team":"ml"},"budget":{"usd":10,"period":"month"}}`)
	f.Add(1, `{"name":"k","project":"{cfgproj}","rpm":10,"tpm":1000,"models":["chat"],"expires_at":"2999-01-01T00:00:00Z","model_limits":{"chat":{"rpm":1}}}`)
	f.Add(2, `{"name":"c","project":"{cfgproj}","external_id":"ext-1","budget":{"usd":1.5,"period":"day","action":"downgrade","downgrade_to":"chat"}}`)
	f.Add(3, `{"rpm":null,"labels":{},"disabled":true}`)
	f.Add(4, `{"input":1.25,"cached_input":0.5,"output":10}`)
	f.Add(0, `{"name":`)
	f.Add(1, `[]`)
	ops := []struct{ method, path string }{
		{"POST", "/admin/projects"},
		{"POST", "/admin/keys"},
		{"POST", "/admin/customers"},
		{"PATCH", "/admin/projects/{cfgproj}"},
		{"PUT", "/admin/prices/gpt-x"},
	}
	f.Fuzz(func(t *testing.T, op int, body string) {
		e.t = t
		o := ops[uint(op)%uint(len(ops))]
		if status, _ := e.do(o.method, o.path, body, "", ""); status >= 500 {
			t.Fatalf("%s %s %q: %d", o.method, o.path, body, status)
		}
	})
}
