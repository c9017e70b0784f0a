package sqlite

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/account"
)

// collidingIDs are two request ids with the same idHash (found by a
// birthday search over "gh-c<n>").
var collidingIDs = [2]string{"gh-c1062789", "gh-c1279192"}

// TestRepeatedIDs: a fresh batch's duplicate check marks exactly the
// second and later records of each id, whatever their hashes share, and
// hands the encoder each record's idHash; batches of many sizes, one
// table reused across them.
func TestRepeatedIDs(t *testing.T) {
	a, b := collidingIDs[0], collidingIDs[1]
	if a == b || idHash(a) != idHash(b) {
		t.Fatalf("%s and %s do not collide", a, b)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var w recordWriter
	for round := range 300 {
		n := rng.IntN(260)
		pool := []string{a, b}
		for k := range 1 + rng.IntN(n+1) {
			pool = append(pool, fmt.Sprintf("gh-%d-%d", round, k))
		}
		rs := make([]account.Record, n)
		for i := range rs {
			rs[i].RequestID = pool[rng.IntN(len(pool))]
		}
		want := make([]bool, n)
		any := false
		for i := range rs {
			for j := range i {
				if rs[j].RequestID == rs[i].RequestID {
					want[i], any = true, true
					break
				}
			}
		}
		got := w.repeatedIDs(rs)
		if !any {
			if got != nil {
				t.Fatalf("round %d: marks %v with no repeat", round, got)
			}
		} else if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: skip (-want +got):\n%s", round, diff)
		}
		if len(w.hashes) != n {
			t.Fatalf("round %d: %d hashes for %d records", round, len(w.hashes), n)
		}
		for i := range rs {
			if w.hashes[i] != idHash(rs[i].RequestID) {
				t.Fatalf("round %d: hash %d is not the id's", round, i)
			}
		}
	}
}
