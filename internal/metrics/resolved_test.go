package metrics

import (
	"fmt"
	"testing"
)

// sameSlot is a tuple whose every key shares one slot of the recent
// table, so that only the key comparison tells them apart.
type sameSlot struct{ a, b string }

func (sameSlot) slot() uint { return 7 }

// TestResolvedSet: a tuple is resolved once and served from then on,
// whether its slot holds it or another tuple that collides with it; a
// dropped tuple is resolved afresh though its slot still holds it; past
// maxBundles a tuple is resolved on every call and kept nowhere, unless
// the set keeps all.
func TestResolvedSet(t *testing.T) {
	var s resolvedSet[sameSlot, string]
	made := map[sameSlot]int{}
	resolve := func(k sameSlot) string {
		made[k]++
		return fmt.Sprintf("%s/%s#%d", k.a, k.b, made[k])
	}
	x, y := sameSlot{"p", "m"}, sameSlot{"p", "n"}
	for i, tc := range []struct {
		k    sameSlot
		want string
	}{{x, "p/m#1"}, {x, "p/m#1"}, {y, "p/n#1"}, {x, "p/m#1"}, {y, "p/n#1"}, {y, "p/n#1"}} {
		if got := s.get(tc.k, resolve); got != tc.want {
			t.Fatalf("call %d: get(%v) = %q, want %q", i, tc.k, got, tc.want)
		}
	}
	if made[x] != 1 || made[y] != 1 {
		t.Fatalf("resolved %v, want each once", made)
	}
	// y holds the slot; dropping it must not leave it served from there.
	s.drop(func(k sameSlot) bool { return k == y })
	if got := s.get(y, resolve); got != "p/n#2" {
		t.Errorf("after the drop: %q, want a fresh p/n#2", got)
	}
	if got := s.get(y, resolve); got != "p/n#2" {
		t.Errorf("after the drop, again: %q, want p/n#2 kept", got)
	}
	if got := s.get(x, resolve); got != "p/m#1" {
		t.Errorf("the tuple not dropped: %q, want p/m#1", got)
	}

	var full resolvedSet[sameSlot, string]
	full.n.Store(maxBundles)
	made = map[sameSlot]int{}
	for i := 1; i <= 3; i++ {
		if got, want := full.get(x, resolve), fmt.Sprintf("p/m#%d", i); got != want {
			t.Errorf("past maxBundles, call %d: %q, want %q", i, got, want)
		}
	}
	// A set that keeps all (the bundles, which hold counts) keeps a
	// tuple past maxBundles too.
	keep := resolvedSet[sameSlot, string]{keepAll: true}
	keep.n.Store(maxBundles)
	made = map[sameSlot]int{}
	for range 3 {
		if got := keep.get(x, resolve); got != "p/m#1" {
			t.Errorf("keepAll past maxBundles: %q, want p/m#1 each time", got)
		}
	}
}

// TestSlotsSpread: the cheap hashes of the usual tuples (a few models
// and projects, the statuses, the routes) do not fall into one slot.
func TestSlotsSpread(t *testing.T) {
	used := map[uint]bool{}
	for _, project := range []string{"team-a", "team-b", "search"} {
		for _, model := range []string{"gpt-4o", "gpt-4o-mini", "claude"} {
			for _, code := range []int{200, 429} {
				k := bundleKey{project: project, model: model, provider: "openai", route: "/v1/chat/completions", code: code}
				used[k.slot()%recentSlots] = true
			}
		}
	}
	if len(used) < 9 {
		t.Errorf("18 tuples in %d slots", len(used))
	}
}

// TestSameKeys: the keys' same agrees with == for keys equal in every
// string but held in other memory (as a request's copy of a label would
// be) and for keys that differ in any one field, by content or by length.
func TestSameKeys(t *testing.T) {
	clone := func(s string) string { return string([]byte(s)) }
	b := bundleKey{"proj", "gpt", "openai", "/v1/chat/completions", "", "miss", 200}
	bc := bundleKey{clone(b.project), clone(b.model), clone(b.provider), clone(b.route), clone(b.kind), clone(b.cache), b.code}
	bs := []bundleKey{b, bc,
		{"proX", b.model, b.provider, b.route, b.kind, b.cache, b.code}, {b.project, "gpu", b.provider, b.route, b.kind, b.cache, b.code},
		{b.project, b.model, "openaj", b.route, b.kind, b.cache, b.code}, {b.project, b.model, b.provider, "/v1/chat/completion", b.kind, b.cache, b.code},
		{b.project, b.model, b.provider, b.route, "x", b.cache, b.code}, {b.project, b.model, b.provider, b.route, b.kind, "hit!", b.code},
		{b.project, b.model, b.provider, b.route, b.kind, b.cache, 201}}
	for i := range bs {
		for j := range bs {
			if got, want := bs[i].same(&bs[j]), bs[i] == bs[j]; got != want {
				t.Errorf("bundle keys %v and %v: same %v, == %v", bs[i], bs[j], got, want)
			}
		}
	}
	a := attemptKey{"gpt", "failover", "openai", "gpt-4o", "ok"}
	ac := attemptKey{clone(a.group), clone(a.strategy), clone(a.provider), clone(a.model), clone(a.outcome)}
	as := []attemptKey{a, ac,
		{"gpX", a.strategy, a.provider, a.model, a.outcome}, {a.group, "failovers", a.provider, a.model, a.outcome},
		{a.group, a.strategy, "openaj", a.model, a.outcome}, {a.group, a.strategy, a.provider, "gpt-4o-mini", a.outcome},
		{a.group, a.strategy, a.provider, a.model, "ko"}}
	for i := range as {
		for j := range as {
			if got, want := as[i].same(&as[j]), as[i] == as[j]; got != want {
				t.Errorf("attempt keys %v and %v: same %v, == %v", as[i], as[j], got, want)
			}
		}
	}
}

// TestIdenticalKeys: identical holds for a key and itself (the same
// strings in the same memory) and never for keys that differ, even where
// a string is another's prefix at the same address; for a key equal by
// content in other memory it is false, and same answers.
func TestIdenticalKeys(t *testing.T) {
	clone := func(s string) string { return string([]byte(s)) }
	b := bundleKey{"proj", "gpt", "openai", "/v1/chat/completions", "", "miss", 200}
	bc := bundleKey{clone(b.project), clone(b.model), clone(b.provider), clone(b.route), b.kind, clone(b.cache), b.code}
	bs := []bundleKey{b, bc,
		{b.project[:3], b.model, b.provider, b.route, b.kind, b.cache, b.code}, {b.project, b.model[:2], b.provider, b.route, b.kind, b.cache, b.code},
		{b.project, b.model, b.provider[:5], b.route, b.kind, b.cache, b.code}, {b.project, b.model, b.provider, b.route[:3], b.kind, b.cache, b.code},
		{b.project, b.model, b.provider, b.route, b.route[:1], b.cache, b.code}, {b.project, b.model, b.provider, b.route, b.kind, b.cache[:3], b.code},
		{b.project, b.model, b.provider, b.route, b.kind, b.cache, 201}}
	for i := range bs {
		for j := range bs {
			if got, want := bs[i].identical(&bs[j]), i == j; got != want {
				t.Errorf("bundle keys %v (#%d) and %v (#%d): identical %v, want %v", bs[i], i, bs[j], j, got, want)
			}
		}
	}
	a := attemptKey{"gpt", "failover", "openai", "gpt-4o", "ok"}
	as := []attemptKey{a, {clone(a.group), clone(a.strategy), clone(a.provider), clone(a.model), clone(a.outcome)},
		{a.group[:2], a.strategy, a.provider, a.model, a.outcome}, {a.group, a.strategy[:4], a.provider, a.model, a.outcome},
		{a.group, a.strategy, a.provider[:1], a.model, a.outcome}, {a.group, a.strategy, a.provider, a.model[:3], a.outcome},
		{a.group, a.strategy, a.provider, a.model, a.outcome[:1]}}
	for i := range as {
		for j := range as {
			if got, want := as[i].identical(&as[j]), i == j; got != want {
				t.Errorf("attempt keys %v (#%d) and %v (#%d): identical %v, want %v", as[i], i, as[j], j, got, want)
			}
		}
	}
}

// TestSlotsAreStable: a key's slot is the same every time and within the
// table; a copy of the key (the same strings) gets the same slot.
func TestSlotsAreStable(t *testing.T) {
	k := bundleKey{"proj", "gpt", "openai", "/v1/chat/completions", "", "miss", 200}
	c := k
	a := attemptKey{"gpt", "failover", "openai", "gpt-4o", "success"}
	ac := a
	if k.slot() != c.slot() || k.slot() >= recentSlots || a.slot() != ac.slot() || a.slot() >= recentSlots {
		t.Errorf("slots %d, %d, %d, %d: want one value below %d for a key and its copy", k.slot(), c.slot(), a.slot(), ac.slot(), recentSlots)
	}
}
