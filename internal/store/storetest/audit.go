package storetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/audit"
	"gatehouse/internal/auth"
)

// testAudit holds a store to audit.Store: entries come back as written,
// in creation order, filtered and paged.
func testAudit(t *testing.T, s auth.Store) {
	as, ok := s.(audit.Store)
	if !ok {
		t.Fatalf("%T does not implement audit.Store", s)
	}
	ctx := ctxFor(t)
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 123456789, time.UTC)
	in := []audit.Entry{
		{Time: t0, Actor: "admin", Role: "admin", Method: "POST", Path: "/admin/projects", ObjectType: "project", ObjectID: "proj_1",
			Status: 201, After: json.RawMessage(`{"id":"proj_1","name":"a"}`)},
		{Time: t0.Add(time.Minute), Actor: "session:ops", Role: "admin", Method: "PATCH", Path: "/admin/keys/key_1", ObjectType: "key",
			ObjectID: "key_1", Status: 200, Before: json.RawMessage(`{"rpm":1}`), After: json.RawMessage(`{"rpm":2}`)},
		{Time: t0.Add(2 * time.Minute), Actor: "admin", Role: "admin", Method: "DELETE", Path: "/admin/cache", ObjectType: "cache", Status: 200},
	}
	for i := range in {
		if err := as.AppendAudit(ctx, &in[i]); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(in[i].ID, "aud_") || (i > 0 && in[i].ID <= in[i-1].ID) {
			t.Fatalf("entry %d has ID %q after %q", i, in[i].ID, in[max(i-1, 0)].ID)
		}
	}
	all, err := as.Audit(ctx, audit.Query{})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]audit.Entry, len(in))
	for i, e := range in {
		e.Time = e.Time.Truncate(time.Microsecond)
		want[i] = e
	}
	// JSON text may be reformatted by a backend but must mean the same.
	norm := func(es []audit.Entry) []audit.Entry {
		out := make([]audit.Entry, len(es))
		for i, e := range es {
			e.Before, e.After = compactJSON(t, e.Before), compactJSON(t, e.After)
			out[i] = e
		}
		return out
	}
	diff(t, "Audit(all)", norm(want), norm(all))

	cases := []struct {
		name string
		q    audit.Query
		want []int
	}{
		{"since", audit.Query{Since: t0.Add(time.Minute)}, []int{1, 2}},
		{"until", audit.Query{Until: t0.Add(time.Minute)}, []int{0}},
		{"window", audit.Query{Since: t0.Add(30 * time.Second), Until: t0.Add(90 * time.Second)}, []int{1}},
		{"object type", audit.Query{ObjectType: "key"}, []int{1}},
		{"actor", audit.Query{Actor: "admin"}, []int{0, 2}},
		{"actor and type", audit.Query{Actor: "admin", ObjectType: "cache"}, []int{2}},
		{"page", audit.Query{Limit: 2}, []int{0, 1}},
		{"after", audit.Query{After: in[0].ID, Limit: 1}, []int{1}},
		{"nothing", audit.Query{Actor: "nobody"}, []int{}},
	}
	for _, c := range cases {
		got, err := as.Audit(ctx, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ids := make([]string, len(got))
		for i, e := range got {
			ids[i] = e.ID
		}
		wantIDs := make([]string, len(c.want))
		for i, n := range c.want {
			wantIDs[i] = in[n].ID
		}
		diff(t, "Audit("+c.name+")", wantIDs, ids)
	}
}

func compactJSON(t *testing.T, r json.RawMessage) json.RawMessage {
	t.Helper()
	if r == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		t.Fatalf("stored JSON %q: %v", r, err)
	}
	b, _ := json.Marshal(v)
	return b
}
