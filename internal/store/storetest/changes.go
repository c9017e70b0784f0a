package storetest

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"gatehouse/internal/auth"
)

// deliveryTimeout is the promise: a revoked or changed key takes
// effect on every replica within a second.
const deliveryTimeout = time.Second

func subscribe(t *testing.T, s auth.Store) <-chan auth.Hash {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := s.KeyChanges(ctx)
	if err != nil {
		t.Fatalf("KeyChanges: %v", err)
	}
	return ch
}

// expect waits until every hash in want has been delivered, each within
// deliveryTimeout of the call, ignoring other changes (creations and the
// like) that may arrive in between.
func expect(t *testing.T, ch <-chan auth.Hash, what string, want ...auth.Hash) {
	t.Helper()
	missing := map[auth.Hash]bool{}
	for _, h := range want {
		missing[h] = true
	}
	timer := time.NewTimer(deliveryTimeout)
	defer timer.Stop()
	for len(missing) > 0 {
		select {
		case h, ok := <-ch:
			if !ok {
				t.Fatalf("%s: KeyChanges closed with %d hashes undelivered", what, len(missing))
			}
			delete(missing, h)
		case <-timer.C:
			for h := range missing {
				t.Errorf("%s: hash %s not delivered within %v", what, hex.EncodeToString(h[:4]), deliveryTimeout)
			}
			return
		}
	}
}

func testKeyChanges(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "watched")
	a, b := subscribe(t, s), subscribe(t, s) // every subscriber gets every change
	k := mustKey(t, s, p.ID, "k")
	expect(t, a, "create", k.Hash)
	expect(t, b, "create", k.Hash)

	k.RPM = 5
	if err := s.UpdateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	expect(t, a, "UpdateKey", k.Hash)
	expect(t, b, "UpdateKey", k.Hash)

	k2 := mustKey(t, s, p.ID, "k2")
	p.TPM = 9
	if err := s.UpdateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	expect(t, a, "UpdateProject", k.Hash, k2.Hash)

	if err := s.RevokeKey(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeKey(ctx, k2.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	expect(t, a, "RevokeKey", k.Hash, k2.Hash)
	expect(t, b, "everything", k.Hash, k2.Hash)

	// TouchKeys is bookkeeping, not a change: caches must not be flushed
	// by every request's last-used time. Drain up to a marker first, so
	// only what follows TouchKeys is looked at.
	drainTo(t, a, mustKey(t, s, p.ID, "before").Hash)
	if err := s.TouchKeys(ctx, map[string]time.Time{k2.ID: time.Now()}); err != nil {
		t.Fatal(err)
	}
	c := &auth.Customer{ProjectID: p.ID, ExternalID: "x", OnExceed: auth.OnExceedBlock}
	if err := s.CreateCustomer(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, h := range drainTo(t, a, mustKey(t, s, p.ID, "after").Hash) {
		if h == k2.Hash {
			t.Error("TouchKeys announced a key change")
		}
	}
}

// drainTo reads ch up to and including marker and returns what came before.
func drainTo(t *testing.T, ch <-chan auth.Hash, marker auth.Hash) []auth.Hash {
	t.Helper()
	var before []auth.Hash
	timer := time.NewTimer(deliveryTimeout)
	defer timer.Stop()
	for {
		select {
		case h, ok := <-ch:
			if !ok {
				t.Fatal("KeyChanges closed before the marker key")
			}
			if h == marker {
				return before
			}
			before = append(before, h)
		case <-timer.C:
			t.Fatal("marker key not delivered")
		}
	}
}

// testKeyChangesEnd checks that a subscription ends with its context and
// that a store can be closed with a subscriber that never reads.
func testKeyChangesEnd(t *testing.T, s auth.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := s.KeyChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idle, err := s.KeyChanges(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = idle
	p := mustProject(t, s, "end")
	for i := range 50 {
		mustKey(t, s, p.ID, string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	cancel()
	timer := time.NewTimer(deliveryTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timer.C:
			t.Fatal("KeyChanges channel still open a second after its context ended")
		}
	}
}

func testReplicaChanges(t *testing.T, s, peer auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "shared")
	k := mustKey(t, s, p.ID, "k")
	onPeer, onSelf := subscribe(t, peer), subscribe(t, s)

	start := time.Now()
	if err := s.RevokeKey(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	expect(t, onPeer, "revocation seen by the other replica", k.Hash)
	expect(t, onSelf, "revocation seen by the writer", k.Hash)
	t.Logf("revocation delivered across replicas in %v", time.Since(start))

	// And the other way round, through a rotation.
	k2 := mustKey(t, peer, p.ID, "k2")
	if err := peer.RotateKey(ctx, k2.ID, hashOf("k2-new"), "gh-n"); err != nil {
		t.Fatal(err)
	}
	expect(t, onSelf, "rotation made on the other replica", k2.Hash, hashOf("k2-new"))
	got, _, err := s.KeyByHash(ctx, hashOf("k2-new"))
	if err != nil || got.ID != k2.ID {
		t.Errorf("rotated key read on the first replica: %v, %v", got, err)
	}
}
