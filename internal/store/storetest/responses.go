package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/responses"
)

// testResponses holds a store to responses.Store: every backend keeps the
// responses created with store: true, so previous_response_id and
// GET/DELETE /v1/responses/{id} work after a restart and, in a cluster,
// on any replica.
func testResponses(t *testing.T, s auth.Store) {
	rs, ok := s.(responses.Store)
	if !ok {
		t.Fatalf("%T does not implement responses.Store", s)
	}
	t.Run("RoundTrip", func(t *testing.T) { testResponseRoundTrip(t, rs) })
	t.Run("Large", func(t *testing.T) { testResponseLarge(t, rs) })
	t.Run("Projects", func(t *testing.T) { testResponseProjects(t, rs) })
	t.Run("Delete", func(t *testing.T) { testResponseDelete(t, rs) })
	t.Run("Upsert", func(t *testing.T) { testResponseUpsert(t, rs) })
	t.Run("Retention", func(t *testing.T) { testResponseRetention(t, rs) })
	t.Run("ContextCancelled", func(t *testing.T) { testResponseCancelled(t, rs) })
}

// responseTime is a creation time with every microsecond digit set, in a
// zone other than UTC, so a store that drops digits or keeps the zone is
// caught. The subtests other than Retention create their responses at
// it, years after Retention's.
func responseTime() time.Time {
	return time.Date(2026, 3, 14, 15, 9, 26, 535897_000, time.FixedZone("UTC+5:30", 5*3600+1800))
}

// The bodies are stored as given, not as JSON: spacing, key order and
// escapes survive, which jsonb or a re-encoding would change.
const (
	oddResponse = `{ "id":"resp_rt", "object" :"response","output":[],"z":1.50,"a":"\u00e9\u2028"}`
	oddItems    = `[{"role":"user","content":"hi"} ,{"type":"message","role":"assistant","content":[]}]` + "\n"
)

func testResponseRoundTrip(t *testing.T, rs responses.Store) {
	ctx := ctxFor(t)
	r := &responses.Stored{ID: "resp_rt", Project: "proj_rt", Model: "gpt-4o-mini", CreatedAt: responseTime(),
		Response: []byte(oddResponse), Items: []byte(oddItems)}
	mustPutResponse(t, rs, r)
	got := mustResponse(t, rs, r.Project, r.ID)
	checkStored(t, "Response", r, got)

	// A project that lives only in the config is a project like any other.
	cfg := &responses.Stored{ID: "resp_cfg", Project: "config:team-a", Model: "claude-haiku",
		CreatedAt: responseTime().Add(time.Microsecond), Response: []byte(`{}`), Items: []byte(`[]`)}
	mustPutResponse(t, rs, cfg)
	checkStored(t, "Response(config project)", cfg, mustResponse(t, rs, cfg.Project, cfg.ID))

	if got, ok, err := rs.Response(ctx, r.Project, "resp_never"); err != nil || ok {
		t.Errorf("Response(unknown id) = %v, %v, %v; want not found", got, ok, err)
	}
}

// testResponseLarge stores a long conversation: a megabyte of bytes of
// every value, NUL and invalid UTF-8 included, so a text column, a
// string conversion or a size limit on the way shows.
func testResponseLarge(t *testing.T, rs responses.Store) {
	rng := rand.New(rand.NewChaCha8([32]byte{'r', 'e', 's', 'p'}))
	body := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	r := &responses.Stored{ID: "resp_large", Project: "proj_large", Model: "gpt-4.1", CreatedAt: responseTime(),
		Response: body(1 << 20), Items: body(1<<20 + 12345)}
	mustPutResponse(t, rs, r)
	checkStored(t, "Response(large)", r, mustResponse(t, rs, r.Project, r.ID))
}

// testResponseProjects checks that a response is invisible to every
// project but its own: it cannot be read or deleted through another.
func testResponseProjects(t *testing.T, rs responses.Store) {
	ctx := ctxFor(t)
	r := &responses.Stored{ID: "resp_mine", Project: "proj_mine", Model: "m", CreatedAt: responseTime(),
		Response: []byte(`{"id":"resp_mine"}`), Items: []byte(`[]`)}
	mustPutResponse(t, rs, r)
	for _, other := range []string{"proj_other", "", "proj_min", "PROJ_MINE"} {
		if got, ok, err := rs.Response(ctx, other, r.ID); err != nil || ok {
			t.Errorf("Response(%q, %q) = %v, %v, %v; want not found", other, r.ID, got, ok, err)
		}
		if ok, err := rs.DeleteResponse(ctx, other, r.ID); err != nil || ok {
			t.Errorf("DeleteResponse(%q, %q) = %v, %v; want false, nil", other, r.ID, ok, err)
		}
	}
	checkStored(t, "Response after other projects' deletes", r, mustResponse(t, rs, r.Project, r.ID))
}

func testResponseDelete(t *testing.T, rs responses.Store) {
	ctx := ctxFor(t)
	r := &responses.Stored{ID: "resp_del", Project: "proj_del", Model: "m", CreatedAt: responseTime(),
		Response: []byte(`{"id":"resp_del"}`), Items: []byte(`[]`)}
	keep := &responses.Stored{ID: "resp_keep", Project: "proj_del", Model: "m", CreatedAt: responseTime(),
		Response: []byte(`{"id":"resp_keep"}`), Items: []byte(`[]`)}
	mustPutResponse(t, rs, r)
	mustPutResponse(t, rs, keep)
	if ok, err := rs.DeleteResponse(ctx, r.Project, r.ID); err != nil || !ok {
		t.Fatalf("DeleteResponse = %v, %v; want true, nil", ok, err)
	}
	if got, ok, err := rs.Response(ctx, r.Project, r.ID); err != nil || ok {
		t.Errorf("Response after DeleteResponse = %v, %v, %v; want not found", got, ok, err)
	}
	if ok, err := rs.DeleteResponse(ctx, r.Project, r.ID); err != nil || ok {
		t.Errorf("second DeleteResponse = %v, %v; want false, nil", ok, err)
	}
	checkStored(t, "Response of a neighbour", keep, mustResponse(t, rs, keep.Project, keep.ID))
}

// testResponseUpsert checks that a second put of an id replaces every
// field: a retried write after a lost commit must not fail.
func testResponseUpsert(t *testing.T, rs responses.Store) {
	first := &responses.Stored{ID: "resp_up", Project: "proj_up", Model: "first", CreatedAt: responseTime(),
		Response: bytes.Repeat([]byte("a"), 5000), Items: []byte(`[{"n":1}]`)}
	mustPutResponse(t, rs, first)
	second := &responses.Stored{ID: "resp_up", Project: "proj_up", Model: "second", CreatedAt: responseTime().Add(time.Second),
		Response: []byte(`{"short":true}`), Items: []byte(`[{"n":1},{"n":2}]`)}
	mustPutResponse(t, rs, second)
	checkStored(t, "Response after the second put", second, mustResponse(t, rs, second.Project, second.ID))
	mustPutResponse(t, rs, second) // the same write again
	checkStored(t, "Response after a repeated put", second, mustResponse(t, rs, second.Project, second.ID))
}

// testResponseRetention checks DeleteResponsesBefore: strictly older
// than the cut, oldest first, at most limit a call, across projects. Its
// responses are years older than the other subtests', which it must not
// touch.
func testResponseRetention(t *testing.T, rs responses.Store) {
	ctx := ctxFor(t)
	base := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
	cut := base.Add(3 * time.Hour)
	var all []*responses.Stored
	// Put out of order, so a store that deletes by id or insertion order
	// rather than by age is caught.
	for _, i := range []int{3, 0, 4, 2, 1} {
		r := &responses.Stored{ID: fmt.Sprintf("resp_old%d", i), Project: []string{"proj_a", "proj_b"}[i%2],
			Model: "m", CreatedAt: base.Add(time.Duration(i) * time.Hour), Response: []byte(`{}`), Items: []byte(`[]`)}
		mustPutResponse(t, rs, r)
		all = append(all, r)
	}
	byID := map[string]*responses.Stored{}
	for _, r := range all {
		byID[r.ID] = r
	}
	left := func() (ids []string) {
		t.Helper()
		for _, id := range []string{"resp_old0", "resp_old1", "resp_old2", "resp_old3", "resp_old4"} {
			if _, ok, err := rs.Response(ctx, byID[id].Project, id); err != nil {
				t.Fatal(err)
			} else if ok {
				ids = append(ids, id)
			}
		}
		return ids
	}

	if n, err := rs.DeleteResponsesBefore(ctx, cut, 0); err != nil || n != 0 {
		t.Errorf("DeleteResponsesBefore(limit 0) = %d, %v; want 0, nil", n, err)
	}
	diff(t, "responses left after limit 0", []string{"resp_old0", "resp_old1", "resp_old2", "resp_old3", "resp_old4"}, left())

	steps := []struct {
		n    int
		left []string
	}{
		{2, []string{"resp_old2", "resp_old3", "resp_old4"}},
		{1, []string{"resp_old3", "resp_old4"}}, // resp_old3 was created at the cut: not before it
		{0, []string{"resp_old3", "resp_old4"}},
	}
	for i, st := range steps {
		n, err := rs.DeleteResponsesBefore(ctx, cut, 2)
		if err != nil {
			t.Fatalf("DeleteResponsesBefore call %d: %v", i+1, err)
		}
		if n != st.n {
			t.Errorf("DeleteResponsesBefore call %d removed %d, want %d", i+1, n, st.n)
		}
		diff(t, "responses left after DeleteResponsesBefore call", st.left, left())
	}
}

func testResponseCancelled(t *testing.T, rs responses.Store) {
	r := &responses.Stored{ID: "resp_ctx", Project: "proj_ctx", Model: "m", CreatedAt: responseTime(),
		Response: []byte(`{}`), Items: []byte(`[]`)}
	old := &responses.Stored{ID: "resp_ctx_old", Project: "proj_ctx", Model: "m", CreatedAt: responseTime(),
		Response: []byte(`{}`), Items: []byte(`[]`)}
	mustPutResponse(t, rs, old)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	checks := map[string]error{"PutResponse": rs.PutResponse(ctx, r)}
	_, _, checks["Response"] = rs.Response(ctx, old.Project, old.ID)
	_, checks["DeleteResponse"] = rs.DeleteResponse(ctx, old.Project, old.ID)
	_, checks["DeleteResponsesBefore"] = rs.DeleteResponsesBefore(ctx, time.Now().Add(time.Hour), 100)
	for name, err := range checks {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
	// Nothing was written or removed.
	if _, ok, err := rs.Response(ctxFor(t), r.Project, r.ID); err != nil || ok {
		t.Errorf("PutResponse with a cancelled context stored the response (ok %v, err %v)", ok, err)
	}
	mustResponse(t, rs, old.Project, old.ID)
}

func mustPutResponse(t *testing.T, rs responses.Store, r *responses.Stored) {
	t.Helper()
	if err := rs.PutResponse(ctxFor(t), r); err != nil {
		t.Fatalf("PutResponse(%s): %v", r.ID, err)
	}
}

func mustResponse(t *testing.T, rs responses.Store, project, id string) *responses.Stored {
	t.Helper()
	r, ok, err := rs.Response(ctxFor(t), project, id)
	if err != nil || !ok {
		t.Fatalf("Response(%q, %q) = %v, %v; want it found", project, id, ok, err)
	}
	return r
}

// checkStored compares a read-back response with what was put: the
// bodies byte for byte (reported by length and first difference, not
// dumped), the time as the same instant in UTC.
func checkStored(t *testing.T, what string, want, got *responses.Stored) {
	t.Helper()
	if got.ID != want.ID || got.Project != want.Project || got.Model != want.Model {
		t.Errorf("%s: id, project, model = %q, %q, %q; want %q, %q, %q", what,
			got.ID, got.Project, got.Model, want.ID, want.Project, want.Model)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		t.Errorf("%s: CreatedAt = %v; want %v in UTC", what, got.CreatedAt, want.CreatedAt.UTC())
	}
	checkBytes(t, what+": Response", want.Response, got.Response)
	checkBytes(t, what+": Items", want.Items, got.Items)
}

func checkBytes(t *testing.T, what string, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	t.Errorf("%s: %d bytes, want %d; they first differ at byte %d", what, len(got), len(want), i)
}
