package store

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"gatehouse/internal/auth"
)

func TestIDs(t *testing.T) {
	var ids IDs
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := ids.New(KeyPrefix, t0)
	if !strings.HasPrefix(a, "key_") || len(a) != len("key_")+26 {
		t.Fatalf("New = %q, want key_ and 26 characters", a)
	}
	// In one millisecond, and even with the clock going back, each ID
	// sorts after the one before; a later millisecond after them all.
	prev := a
	for i, at := range []time.Time{t0, t0, t0.Add(-time.Second), t0} {
		id := ids.New(KeyPrefix, at)
		if id <= prev {
			t.Fatalf("ID %d, %q, does not sort after %q", i, id, prev)
		}
		prev = id
	}
	if later := ids.New(KeyPrefix, t0.Add(time.Millisecond)); later <= prev {
		t.Errorf("%q <= %q: a later millisecond must sort after", later, prev)
	}
	// Another generator (another replica) in the same millisecond makes a
	// different ID: the random part is there.
	var other IDs
	if other.New(KeyPrefix, t0) == a {
		t.Error("two generators made the same ID in one millisecond")
	}
	// The time prefix: IDs of one generator a day apart keep their order
	// whatever the random bits.
	var g IDs
	if x, y := g.New(KeyPrefix, t0.Add(24*time.Hour)), new(IDs).New(KeyPrefix, t0); y >= x {
		t.Errorf("%q >= %q: an ID a day earlier must sort first", y, x)
	}
}

func TestPageLimit(t *testing.T) {
	for limit, want := range map[int]int{0: auth.MaxPageSize, -5: auth.MaxPageSize, 1: 1, auth.MaxPageSize: auth.MaxPageSize, auth.MaxPageSize + 1: auth.MaxPageSize} {
		if got := PageLimit(auth.Page{Limit: limit}); got != want {
			t.Errorf("PageLimit(%d) = %d, want %d", limit, got, want)
		}
	}
}

func TestMigrations(t *testing.T) {
	fs := fstest.MapFS{
		"m/0002_b.sql": {Data: []byte("B")},
		"m/0001_a.sql": {Data: []byte("A")},
		"m/README":     {Data: []byte("ignored")},
	}
	ms, err := Migrations(fs, "m")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].SQL != "A" || ms[1].Version != 2 {
		t.Fatalf("Migrations = %+v", ms)
	}
	if p, err := Pending(ms, 1); err != nil || len(p) != 1 || p[0].Name != "0002_b.sql" {
		t.Errorf("Pending(1) = %v, %v", p, err)
	}
	if _, err := Pending(ms, 3); err == nil {
		t.Error("Pending accepted a newer database")
	}
	fs["m/0004_d.sql"] = &fstest.MapFile{Data: []byte("D")}
	if _, err := Migrations(fs, "m"); err == nil {
		t.Error("a gap in versions was accepted")
	}
}

// recv waits for the hub's next delivery. The bound only turns a hub that
// never delivers into a failure instead of a hung test: it is far longer
// than any delivery takes, even on a loaded machine.
func recv(t *testing.T, ch <-chan auth.Hash) auth.Hash {
	t.Helper()
	select {
	case h := <-ch:
		return h
	case <-time.After(30 * time.Second):
		t.Fatal("nothing delivered")
		return auth.Hash{}
	}
}

func TestHubOverflowFlushes(t *testing.T) {
	var h Hub
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := h.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A reader that does not read: publishing must never block, and what
	// overflows becomes one "drop everything".
	for i := range 3 * maxPending {
		h.Publish(auth.HashKey(string(rune(i))))
	}
	sawFlush := false
	for range 200 {
		if recv(t, ch).IsZero() {
			sawFlush = true
			break
		}
	}
	if !sawFlush {
		t.Fatal("overflow did not deliver the zero Hash")
	}
	want := auth.HashKey("after")
	h.Publish(want)
	for {
		if got := recv(t, ch); got == want {
			break
		}
	}
}

func TestHubEnds(t *testing.T) {
	var h Hub
	ctx, cancel := context.WithCancel(context.Background())
	a, _ := h.Subscribe(ctx)
	b, _ := h.Subscribe(context.Background())
	h.Publish(auth.HashKey("x"))
	if recv(t, a) != auth.HashKey("x") || recv(t, b) != auth.HashKey("x") {
		t.Fatal("every subscriber gets every change")
	}
	cancel()
	for range a {
	}
	h.Close()
	for range b {
	}
	if _, err := h.Subscribe(context.Background()); err == nil {
		t.Error("Subscribe after Close succeeded")
	}
}
