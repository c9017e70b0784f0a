package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/auth"
)

func testKeys(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "keys")
	exp := time.Now().Add(24 * time.Hour)
	k := &auth.Key{
		ProjectID: p.ID, Name: "ci", Hash: hashOf("ci"), Prefix: "gh-ci12",
		Limits: auth.Limits{RPM: 60, TPM: 1000},
		Budget: &auth.Budget{USD: 10, Period: auth.PeriodDay},
		Models: []string{"gpt-4o-mini"}, Labels: map[string]string{"owner": "ci"},
		Providers:   []string{"openai", "local-vllm"},
		ModelLimits: map[string]auth.Limits{"gpt-4o-mini": {RPM: 3}, "big/model:v1": {RPM: 1, TPM: 900}},
		ExpiresAt:   &exp,
		NoCache:     true,
	}
	if err := s.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if len(k.ID) < 10 || k.ID[:4] != "key_" {
		t.Errorf("ID = %q, want key_…", k.ID)
	}
	checkStamp(t, "CreatedAt", k.CreatedAt)
	got, err := s.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Key", k, got)
	if got.Hash != k.Hash {
		t.Error("Key: hash not kept") // cmp skips nothing, but say it plainly
	}

	gk, gp, err := s.KeyByHash(ctx, k.Hash)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "KeyByHash key", k, gk)
	diff(t, "KeyByHash project", p, gp)
	if !gk.Active(time.Now()) {
		t.Error("new key not active")
	}
	_, _, err = s.KeyByHash(ctx, hashOf("never created"))
	wantErr(t, "KeyByHash(unknown)", err, auth.ErrNotFound)
	wantErr(t, "Key(unknown)", second(s.Key(ctx, "key_nope")), auth.ErrNotFound)

	// UpdateKey writes settings only: a changed hash or project in the
	// record is ignored, and the record is reloaded.
	time.Sleep(2 * time.Millisecond)
	orig := k.Hash
	k.Name, k.RPM, k.Budget, k.Models, k.Labels, k.ExpiresAt, k.NoCache = "ci-2", 120, nil, nil, nil, nil, false
	k.ModelLimits = map[string]auth.Limits{"gpt-4o": {TPM: 500}}
	k.Providers = []string{"anthropic"}
	k.Hash, k.ProjectID = hashOf("sneaky"), "proj_other"
	if err := s.UpdateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if k.Hash != orig || k.ProjectID != p.ID {
		t.Errorf("UpdateKey changed hash or project (project now %q)", k.ProjectID)
	}
	if !k.UpdatedAt.After(k.CreatedAt) {
		t.Errorf("UpdatedAt %v not after CreatedAt %v", k.UpdatedAt, k.CreatedAt)
	}
	got, err = s.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "updated key", k, got)
	if got.Name != "ci-2" || got.RPM != 120 || got.ExpiresAt != nil || got.Budget != nil || got.NoCache {
		t.Errorf("update not applied: %+v", got)
	}
	diff(t, "updated model limits", map[string]auth.Limits{"gpt-4o": {TPM: 500}}, got.ModelLimits)
	// An empty map clears them and reads back as nil.
	k.ModelLimits = map[string]auth.Limits{}
	if err := s.UpdateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if got, err = s.Key(ctx, k.ID); err != nil || got.ModelLimits != nil {
		t.Errorf("cleared model limits read back as %v, %v", got.ModelLimits, err)
	}
	wantErr(t, "UpdateKey(unknown)", s.UpdateKey(ctx, &auth.Key{ID: "key_nope"}), auth.ErrNotFound)

	// KeyByHash sees project changes.
	p.RPM = 7
	if err := s.UpdateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, gp, err = s.KeyByHash(ctx, orig); err != nil || gp.RPM != 7 {
		t.Errorf("KeyByHash after UpdateProject: project rpm %v, %v", gp, err)
	}
}

func testKeyConflicts(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "dup")
	k := mustKey(t, s, p.ID, "first")
	again := &auth.Key{ProjectID: p.ID, Name: "second", Hash: k.Hash, Prefix: "gh-x"}
	wantErr(t, "CreateKey with a taken hash", s.CreateKey(ctx, again), auth.ErrConflict)
	orphan := &auth.Key{ProjectID: "proj_nope", Name: "orphan", Hash: hashOf("orphan"), Prefix: "gh-o"}
	wantErr(t, "CreateKey in an unknown project", s.CreateKey(ctx, orphan), auth.ErrNotFound)
}

func testRotateKey(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "rot")
	k := mustKey(t, s, p.ID, "old")
	other := mustKey(t, s, p.ID, "other")
	changes := subscribe(t, s)

	newHash := hashOf("rotated")
	if err := s.RotateKey(ctx, k.ID, newHash, "gh-new1"); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.KeyByHash(ctx, k.Hash)
	wantErr(t, "KeyByHash(old hash)", err, auth.ErrNotFound)
	got, _, err := s.KeyByHash(ctx, newHash)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != k.ID || got.Prefix != "gh-new1" || got.Name != k.Name || !got.CreatedAt.Equal(k.CreatedAt) {
		t.Errorf("rotated key = %+v, want same identity as %+v with prefix gh-new1", got, k)
	}
	expect(t, changes, "rotation", k.Hash, newHash)

	wantErr(t, "RotateKey to a taken hash", s.RotateKey(ctx, k.ID, other.Hash, "gh-x"), auth.ErrConflict)
	if _, _, err := s.KeyByHash(ctx, newHash); err != nil {
		t.Errorf("failed rotation lost the key: %v", err)
	}
	wantErr(t, "RotateKey(unknown)", s.RotateKey(ctx, "key_nope", hashOf("z"), "gh-z"), auth.ErrNotFound)
}

func testRevokeKey(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "rev")
	k := mustKey(t, s, p.ID, "k")
	changes := subscribe(t, s)
	at := time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)
	if err := s.RevokeKey(ctx, k.ID, at); err != nil {
		t.Fatal(err)
	}
	expect(t, changes, "revocation", k.Hash)
	got, _, err := s.KeyByHash(ctx, k.Hash)
	if err != nil {
		t.Fatalf("KeyByHash of a revoked key: %v (it must still be found, to be cached as revoked)", err)
	}
	if got.RevokedAt == nil || !got.RevokedAt.Equal(at) {
		t.Errorf("RevokedAt = %v, want %v", got.RevokedAt, at)
	}
	if got.Active(time.Now()) {
		t.Error("revoked key still active")
	}
	if err := s.RevokeKey(ctx, k.ID, at.Add(time.Hour)); err != nil {
		t.Fatalf("second revoke: %v", err)
	}
	got, err = s.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.RevokedAt.Equal(at) {
		t.Errorf("second revoke moved RevokedAt to %v, want the first %v", got.RevokedAt, at)
	}
	wantErr(t, "RevokeKey(unknown)", s.RevokeKey(ctx, "key_nope", at), auth.ErrNotFound)
}

func testTouchKeys(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "touch")
	a, b, c := mustKey(t, s, p.ID, "a"), mustKey(t, s, p.ID, "b"), mustKey(t, s, p.ID, "c")
	t1 := time.Now().UTC().Truncate(time.Microsecond)
	t0 := t1.Add(-time.Minute)
	if err := s.TouchKeys(ctx, map[string]time.Time{a.ID: t1, b.ID: t0, "key_gone": t1}); err != nil {
		t.Fatal(err)
	}
	// An older time arriving late does not move LastUsedAt back.
	if err := s.TouchKeys(ctx, map[string]time.Time{a.ID: t0, b.ID: t1}); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchKeys(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		k    *auth.Key
		want *time.Time
	}{{a, &t1}, {b, &t1}, {c, nil}} {
		got, err := s.Key(ctx, tc.k.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.want == nil && got.LastUsedAt != nil:
			t.Errorf("%s: LastUsedAt = %v, want nil", tc.k.Name, got.LastUsedAt)
		case tc.want != nil && (got.LastUsedAt == nil || !got.LastUsedAt.Equal(*tc.want)):
			t.Errorf("%s: LastUsedAt = %v, want %v", tc.k.Name, got.LastUsedAt, *tc.want)
		}
	}
}

// testConcurrentWriters checks that parallel admin writes (and reads on
// the auth path meanwhile) all succeed: no "database is locked".
func testConcurrentWriters(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "busy")
	const writers, each = 20, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*3)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				k := &auth.Key{ProjectID: p.ID, Name: fmt.Sprintf("w%d-%d", w, i), Hash: hashOf(fmt.Sprintf("w%d-%d", w, i)), Prefix: "gh-w"}
				if err := s.CreateKey(ctx, k); err != nil {
					errs <- fmt.Errorf("CreateKey: %w", err)
					continue
				}
				if _, _, err := s.KeyByHash(ctx, k.Hash); err != nil {
					errs <- fmt.Errorf("KeyByHash: %w", err)
				}
				if err := s.TouchKeys(ctx, map[string]time.Time{k.ID: time.Now()}); err != nil {
					errs <- fmt.Errorf("TouchKeys: %w", err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	keys, err := s.Keys(ctx, p.ID, auth.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != writers*each {
		t.Errorf("%d keys after concurrent creation, want %d", len(keys), writers*each)
	}
}

func testContextCancelled(t *testing.T, s auth.Store) {
	p := mustProject(t, s, "ctx")
	k := mustKey(t, s, p.ID, "k")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	checks := map[string]error{
		"Project":       second(s.Project(ctx, p.ID)),
		"CreateProject": s.CreateProject(ctx, &auth.Project{Name: "never"}),
		"Keys":          second(s.Keys(ctx, "", auth.Page{})),
		"TouchKeys":     s.TouchKeys(ctx, map[string]time.Time{k.ID: time.Now()}),
		"RevokeKey":     s.RevokeKey(ctx, k.ID, time.Now()),
	}
	_, _, checks["KeyByHash"] = s.KeyByHash(ctx, k.Hash)
	_, checks["KeyChanges"] = s.KeyChanges(ctx)
	for name, err := range checks {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
	// Nothing was written.
	if _, err := s.ProjectByName(ctxFor(t), "never"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("CreateProject with a cancelled context wrote the project: %v", err)
	}
	got, err := s.Key(ctxFor(t), k.ID)
	if err != nil || got.RevokedAt != nil {
		t.Errorf("RevokeKey with a cancelled context revoked the key: %v, %v", got, err)
	}

	deadline, cancel2 := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel2()
	<-deadline.Done()
	if _, err := s.Project(deadline, p.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Project past its deadline: %v, want context.DeadlineExceeded", err)
	}
}
