package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"gatehouse/internal/auth"
	"gatehouse/internal/llm"
)

func TestKeysPrincipal(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	yes := true
	p := mustProject(t, st, &auth.Project{
		Name: "search", Limits: auth.Limits{RPM: 600, TPM: 1_000_000},
		Budget: &auth.Budget{USD: 100, Period: auth.PeriodMonth},
		Models: []string{"gpt-4o", "gpt-4o-mini", "claude"},
		Labels: map[string]string{"team": "search", "env": "prod"},
		Cache:  &auth.ProjectCache{Exact: auth.ExactCacheOverride{Enabled: &yes}}, LogBodies: true,
	})
	clk := newClock()
	exp := clk.Now().Add(48 * time.Hour)
	full := mustKey(t, st, &auth.Key{
		ProjectID: p.ID, Name: "ci", Limits: auth.Limits{RPM: 60, TPM: 1000},
		Budget: &auth.Budget{USD: 5, Period: auth.PeriodDay},
		Models: []string{"gpt-4o-mini", "o3"}, Labels: map[string]string{"env": "ci", "owner": "ana"},
		ExpiresAt: &exp,
	}, "gh-full-secret")
	plain := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-plain-secret")
	disjoint := mustKey(t, st, &auth.Key{ProjectID: p.ID, Models: []string{"o3"}}, "gh-disjoint-secret")
	open := mustProject(t, st, &auth.Project{Name: "open"})
	anyKey := mustKey(t, st, &auth.Key{ProjectID: open.ID}, "gh-any-secret")

	k := newKeys(t, st, auth.KeysOptions{Now: clk.Now}, auth.StaticKey{
		Secret: "gh-static-secret", Principal: auth.Principal{KeyID: "static:demo", Project: "demo", RPM: 5},
	})

	cases := []struct {
		secret string
		want   *auth.Principal
		err    error
	}{
		{"gh-full-secret", &auth.Principal{
			KeyID: full.ID, Name: "ci", Project: "search", ProjectID: p.ID, RPM: 60, TPM: 1000,
			Budget:        &auth.Budget{USD: 5, Period: auth.PeriodDay},
			ProjectLimits: auth.Limits{RPM: 600, TPM: 1_000_000},
			ProjectBudget: &auth.Budget{USD: 100, Period: auth.PeriodMonth},
			Models:        map[string]bool{"gpt-4o-mini": true},
			Labels:        map[string]string{"team": "search", "env": "ci", "owner": "ana"},
			ExpiresAt:     exp, Cache: &auth.ProjectCache{Exact: auth.ExactCacheOverride{Enabled: &yes}}, LogBodies: true,
		}, nil},
		{"gh-plain-secret", &auth.Principal{
			KeyID: plain.ID, Name: "gh-plain-secret", Project: "search", ProjectID: p.ID,
			ProjectLimits: auth.Limits{RPM: 600, TPM: 1_000_000},
			ProjectBudget: &auth.Budget{USD: 100, Period: auth.PeriodMonth},
			Models:        map[string]bool{"gpt-4o": true, "gpt-4o-mini": true, "claude": true},
			Labels:        map[string]string{"team": "search", "env": "prod"},
			Cache:         &auth.ProjectCache{Exact: auth.ExactCacheOverride{Enabled: &yes}}, LogBodies: true,
		}, nil},
		{"gh-disjoint-secret", &auth.Principal{
			KeyID: disjoint.ID, Name: "gh-disjoint-secret", Project: "search", ProjectID: p.ID,
			ProjectLimits: auth.Limits{RPM: 600, TPM: 1_000_000},
			ProjectBudget: &auth.Budget{USD: 100, Period: auth.PeriodMonth},
			Models:        map[string]bool{}, // the lists share nothing: no model
			Labels:        map[string]string{"team": "search", "env": "prod"},
			Cache:         &auth.ProjectCache{Exact: auth.ExactCacheOverride{Enabled: &yes}}, LogBodies: true,
		}, nil},
		{"gh-any-secret", &auth.Principal{KeyID: anyKey.ID, Name: "gh-any-secret", Project: "open", ProjectID: open.ID}, nil},
		{"gh-static-secret", &auth.Principal{KeyID: "static:demo", Project: "demo", RPM: 5, ReadOnly: true, StaticTag: "static:demo"}, nil},
		{"gh-unknown-secret", nil, auth.ErrBadKey},
		{"", nil, auth.ErrMissingKey},
	}
	for _, c := range cases {
		for range 2 { // the lookup, then the cached answer
			got, err := k.Resolve(ctx, c.secret)
			if err != c.err {
				t.Fatalf("%q: error %v, want %v", c.secret, err, c.err)
			}
			// The quoted names and rate texts are made with the principal, for the log line and headers,
			// its limit.Memo, for the admissions of the key, and its LineMemo.
			if diff := cmp.Diff(c.want, got, cmpopts.IgnoreFields(auth.Principal{}, "QuotedKeyID", "LogMembers", "LimitMemo", "LineMemo"), cmpopts.IgnoreUnexported(auth.Principal{})); diff != "" {
				t.Errorf("%q: principal (-want +got):\n%s", c.secret, diff)
			}
			if got != nil && (got.LimitMemo == nil || got.LineMemo == nil) {
				t.Errorf("%q: principal made without a LimitMemo or a LineMemo", c.secret)
			}
			if got != nil && (got.QuotedKeyID != llm.Quote(got.KeyID) || got.LogMembers != wantLogMembers(got)) {
				t.Errorf("%q: quoted names %+v %+v", c.secret, got.QuotedKeyID, got.LogMembers)
			}
		}
	}
	for model, want := range map[string]bool{"gpt-4o-mini": true, "o3": false, "gpt-4o": false} {
		got, _ := k.Resolve(ctx, "gh-full-secret")
		if got.Allows(model) != want {
			t.Errorf("full key Allows(%q) = %v, want %v", model, !want, want)
		}
	}
	if got, _ := k.Resolve(ctx, "gh-disjoint-secret"); got.Allows("o3") || got.Allows("gpt-4o") {
		t.Error("a key whose models are outside its project's may call them")
	}
	if got, _ := k.Resolve(ctx, "gh-any-secret"); !got.Allows("whatever") {
		t.Error("an unrestricted key may not call a model")
	}
}

func TestKeysAuthenticate(t *testing.T) {
	st := openSQLite(t)
	p := mustProject(t, st, &auth.Project{Name: "p"})
	key := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-http-secret")
	k := newKeys(t, st, auth.KeysOptions{})
	req := func(h, v string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
		if h != "" {
			r.Header.Set(h, v)
		}
		return r
	}
	if got, err := k.Authenticate(req("Authorization", "Bearer gh-http-secret")); err != nil || got.KeyID != key.ID {
		t.Fatalf("bearer: %+v, %v", got, err)
	}
	if got, err := k.Authenticate(req("X-Api-Key", "gh-http-secret")); err != nil || got.KeyID != key.ID {
		t.Fatalf("x-api-key: %+v, %v", got, err)
	}
	if _, err := k.Authenticate(req("", "")); err != auth.ErrMissingKey {
		t.Fatalf("no key: %v", err)
	}
	if _, err := k.Authenticate(req("Authorization", "Bearer gh-nope-secret")); err != auth.ErrBadKey {
		t.Fatalf("bad key: %v", err)
	}
	// A secret hashed by the caller finds the same principal (the
	// gateway hashes it once for the static table and this one).
	if got, err := k.ResolveHash(context.Background(), auth.HashKey("gh-http-secret")); err != nil || got.KeyID != key.ID {
		t.Fatalf("by hash: %+v, %v", got, err)
	}
	if _, err := k.ResolveHash(context.Background(), auth.HashKey("gh-nope-secret")); err != auth.ErrBadKey {
		t.Fatalf("bad key by hash: %v", err)
	}
	s := auth.NewStatic([]auth.StaticKey{{Secret: "gh-static", Principal: auth.Principal{KeyID: "s"}}})
	if p, ok := s.LookupHash(auth.HashKey("gh-static")); !ok || p.KeyID != "s" {
		t.Fatalf("static by hash: %+v, %v", p, ok)
	}
	if _, ok := s.LookupHash(auth.HashKey("gh-http-secret")); ok {
		t.Fatal("static by hash found a key it does not have")
	}
}

// TestKeysBadKeysLookAlike: unknown, revoked and expired keys get the same
// error, so a caller cannot tell which keys once existed.
func TestKeysBadKeysLookAlike(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	clk := newClock()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	revoked := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-revoked-secret")
	if err := st.RevokeKey(ctx, revoked.ID, clk.Now()); err != nil {
		t.Fatal(err)
	}
	past := clk.Now().Add(-time.Hour)
	mustKey(t, st, &auth.Key{ProjectID: p.ID, ExpiresAt: &past}, "gh-expired-secret")
	k := newKeys(t, st, auth.KeysOptions{Now: clk.Now})
	for _, secret := range []string{"gh-revoked-secret", "gh-expired-secret", "gh-never-secret"} {
		_, err := k.Resolve(ctx, secret)
		if err != auth.ErrBadKey {
			t.Errorf("%s: %v, want ErrBadKey", secret, err)
		}
	}
}

func TestKeysRevocationEmbedded(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	key := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-soon-revoked")
	k := newKeys(t, st, auth.KeysOptions{})
	if _, err := k.Resolve(ctx, "gh-soon-revoked"); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeKey(ctx, key.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitBad(t, k, "gh-soon-revoked", time.Second)
}

// TestKeysChanges: every kind of change the store announces reaches the
// cache, without waiting for any TTL.
func TestKeysChanges(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	clk := newClock()
	p := mustProject(t, st, &auth.Project{Name: "p", Models: []string{"a", "b"}})
	key := mustKey(t, st, &auth.Key{ProjectID: p.ID, Limits: auth.Limits{RPM: 10}}, "gh-change-secret")
	sp := &spy{Store: st}
	k := newKeys(t, sp, auth.KeysOptions{Now: clk.Now})
	secret := "gh-change-secret"
	resolve := func() (*auth.Principal, error) { return k.Resolve(ctx, secret) }
	eventually := func(what string, ok func(*auth.Principal, error) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			p, err := resolve()
			if ok(p, err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen within 10s: %+v %v", what, p, err)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	first, err := resolve()
	if err != nil || first.RPM != 10 {
		t.Fatalf("%+v %v", first, err)
	}

	key.RPM = 20
	if err := st.UpdateKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	eventually("key update", func(p *auth.Principal, err error) bool { return err == nil && p.RPM == 20 })
	// The edited key's admissions start a Memo of their own (the old
	// one's plans would not fit them anyway: they hold the old limits).
	if pr, _ := resolve(); pr.LimitMemo == nil || pr.LimitMemo == first.LimitMemo {
		t.Errorf("the edited key's principal has LimitMemo %p, the first's %p: want a new one", pr.LimitMemo, first.LimitMemo)
	}

	p.Models = []string{"b"}
	if err := st.UpdateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually("project update", func(p *auth.Principal, err error) bool { return err == nil && !p.Allows("a") && p.Allows("b") })

	// A renamed project: the principal made after the change carries the
	// log line's members of the new name, never the old text.
	p.Name = `p "renamed"`
	if err := st.UpdateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually("project rename", func(p *auth.Principal, err error) bool { return err == nil && p.Project == `p "renamed"` })
	if pr, _ := resolve(); pr.LogMembers != wantLogMembers(pr) ||
		pr.LogMembers.Text(auth.LogKeyMember, pr.KeyID, auth.LogProjectMember, pr.Project) != `,"key":"`+key.ID+`","project":"p \"renamed\""` {
		t.Errorf("renamed project: log members %+v", pr.LogMembers)
	}

	// Rotation: the old secret stops working, the new one works at once
	// although it was just remembered as unknown.
	if _, err := k.Resolve(ctx, "gh-rotated-secret"); err != auth.ErrBadKey {
		t.Fatalf("new secret before rotation: %v", err)
	}
	if err := st.RotateKey(ctx, key.ID, auth.HashKey("gh-rotated-secret"), "gh-rota"); err != nil {
		t.Fatal(err)
	}
	eventually("rotation (old secret)", func(p *auth.Principal, err error) bool { return err == auth.ErrBadKey })
	deadline := time.Now().Add(10 * time.Second)
	for {
		pr, err := k.Resolve(ctx, "gh-rotated-secret")
		if err == nil {
			if pr.KeyID != key.ID {
				t.Fatalf("rotated key resolves to %s, want %s", pr.KeyID, key.ID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rotated secret still refused after 10s (fake clock never advanced past MissTTL): %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}

	// Expiry set by an update, then reached on the clock with no further
	// change.
	secret = "gh-rotated-secret"
	exp := clk.Now().Add(time.Minute)
	key.ExpiresAt = &exp
	if err := st.UpdateKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	eventually("expiry set", func(p *auth.Principal, err error) bool { return err == nil && p.ExpiresAt.Equal(exp) })
	before := sp.lookups.Load()
	clk.Advance(time.Minute)
	if _, err := k.Resolve(ctx, "gh-rotated-secret"); err != auth.ErrBadKey {
		t.Fatalf("expired key: %v", err)
	}
	if n := sp.lookups.Load() - before; n != 0 {
		t.Errorf("expiry check made %d store lookups, want 0", n)
	}
}

// wantLogMembers is the LogMembers a principal is made with.
func wantLogMembers(p *auth.Principal) llm.Members {
	if p.Project == "" {
		return llm.Members{}
	}
	return llm.MakeMembers(auth.LogKeyMember, p.KeyID, auth.LogProjectMember, p.Project)
}

// TestKeysFlushAll: the zero Hash empties the cache.
func TestKeysFlushAll(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	for i := range 10 {
		mustKey(t, st, &auth.Key{ProjectID: p.ID}, fmt.Sprintf("gh-flush-%d", i))
	}
	sp := &spy{Store: st, changes: make(chan auth.Hash)}
	k := newKeys(t, sp, auth.KeysOptions{})
	for i := range 10 {
		if _, err := k.Resolve(ctx, fmt.Sprintf("gh-flush-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	k.Resolve(ctx, "gh-unknown")
	if keys, misses := k.CacheLen(); keys != 10 || misses != 1 {
		t.Fatalf("cache holds %d keys, %d misses; want 10, 1", keys, misses)
	}
	sp.deliver(auth.HashKey("gh-flush-3"))
	if keys, _ := k.CacheLen(); keys != 9 {
		t.Fatalf("after one change the cache holds %d keys, want 9", keys)
	}
	sp.deliver(auth.Hash{})
	if keys, misses := k.CacheLen(); keys != 0 || misses != 0 {
		t.Fatalf("after a flush the cache holds %d keys, %d misses; want none", keys, misses)
	}
}

// TestKeysStaleLookupNotCached: a lookup that read the record before a
// change and finished after the change was announced must not put the
// old answer in the cache.
func TestKeysStaleLookupNotCached(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	key := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-racy-secret")
	sp := &spy{Store: st, changes: make(chan auth.Hash), gate: make(chan struct{})}
	k := newKeys(t, sp, auth.KeysOptions{})

	type result struct {
		p   *auth.Principal
		err error
	}
	done := make(chan result)
	go func() {
		p, err := k.Resolve(ctx, "gh-racy-secret")
		done <- result{p, err}
	}()
	for sp.reads.Load() == 0 { // the record is read, not merely asked for
		time.Sleep(time.Millisecond)
	}
	// The lookup has read the active key; now it is revoked and the
	// change announced before the lookup returns.
	if err := st.RevokeKey(ctx, key.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	sp.deliver(key.Hash)
	sp.gate <- struct{}{}
	if r := <-done; r.err != nil || r.p.KeyID != key.ID {
		t.Fatalf("the racing request: %+v %v (it began before the revocation, so it may pass)", r.p, r.err)
	}
	close(sp.gate)
	if _, err := k.Resolve(ctx, "gh-racy-secret"); err != auth.ErrBadKey {
		t.Fatalf("after the revocation: %v, want ErrBadKey (a stale lookup was cached)", err)
	}
	if n := sp.lookups.Load(); n != 2 {
		t.Errorf("%d lookups, want 2", n)
	}
}

// TestKeysSingleFlight: concurrent first uses of one key, valid or not,
// make one store lookup.
func TestKeysSingleFlight(t *testing.T) {
	for _, secret := range []string{"gh-valid-secret", "gh-unknown-secret"} {
		t.Run(secret, func(t *testing.T) {
			st := openSQLite(t)
			p := mustProject(t, st, &auth.Project{Name: "p"})
			mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-valid-secret")
			sp := &spy{Store: st, gate: make(chan struct{})}
			k := newKeys(t, sp, auth.KeysOptions{})
			const n = 50
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() { _, errs[i] = k.Resolve(context.Background(), secret) })
			}
			for sp.lookups.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // let the others pile up behind the one lookup
			close(sp.gate)
			wg.Wait()
			if got := sp.lookups.Load(); got != 1 {
				t.Errorf("%d concurrent requests made %d lookups, want 1", n, got)
			}
			for i, err := range errs {
				if want := error(nil); secret == "gh-unknown-secret" {
					want = auth.ErrBadKey
					if err != want {
						t.Fatalf("request %d: %v, want %v", i, err, want)
					}
				} else if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
			}
		})
	}
}

// TestKeysNegativeCache: a repeated unknown key costs one lookup per
// MissTTL, and a key created with that hash works at once.
func TestKeysNegativeCache(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	clk := newClock()
	sp := &spy{Store: st}
	k := newKeys(t, sp, auth.KeysOptions{Now: clk.Now, MissTTL: 2 * time.Second})
	for range 1000 {
		if _, err := k.Resolve(ctx, "gh-later-secret"); err != auth.ErrBadKey {
			t.Fatal(err)
		}
	}
	if n := sp.lookups.Load(); n != 1 {
		t.Fatalf("1000 requests for one unknown key made %d lookups, want 1", n)
	}
	clk.Advance(2 * time.Second)
	k.Resolve(ctx, "gh-later-secret")
	if n := sp.lookups.Load(); n != 2 {
		t.Fatalf("after MissTTL: %d lookups, want 2", n)
	}
	p := mustProject(t, st, &auth.Project{Name: "p"})
	mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-later-secret")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := k.Resolve(ctx, "gh-later-secret")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("created key still refused: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestKeysMissRateLimit: a flood of distinct random keys makes at most
// MissBurst lookups, plus MissRate a second.
func TestKeysMissRateLimit(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	clk := newClock()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-cached-secret")
	sp := &spy{Store: st}
	k := newKeys(t, sp, auth.KeysOptions{Now: clk.Now, MissRate: 10, MissBurst: 20})
	if _, err := k.Resolve(ctx, "gh-cached-secret"); err != nil {
		t.Fatal(err)
	}
	throttled := 0
	for i := range 5000 {
		_, err := k.Resolve(ctx, fmt.Sprintf("gh-random-%d", i))
		var ge *llm.Error
		switch {
		case err == auth.ErrBadKey: // looked up: unknown
		case errors.As(err, &ge) && ge.Status == http.StatusServiceUnavailable && ge.RetryAfter > 0:
			throttled++ // not looked up: retry later, never "bad key"
		default:
			t.Fatalf("random key %d: %v", i, err)
		}
	}
	if throttled != 5000-19 {
		t.Fatalf("%d keys throttled with a 503, want all but the 19 looked up", throttled)
	}
	if n := sp.lookups.Load(); n != 1+19 {
		t.Fatalf("5000 random keys made %d lookups, want the burst (19 left after the cached key's)", n-1)
	}
	// A cached key is still served while the budget is spent.
	if _, err := k.Resolve(ctx, "gh-cached-secret"); err != nil {
		t.Fatalf("cached key during a flood: %v", err)
	}
	clk.Advance(time.Second) // 10 tokens
	for i := range 100 {
		k.Resolve(ctx, fmt.Sprintf("gh-random2-%d", i))
	}
	if n := sp.lookups.Load(); n != 1+19+10 {
		t.Fatalf("a second later: %d lookups, want 10 more", n-20)
	}
	if _, misses := k.CacheLen(); misses > 1000 {
		t.Fatalf("%d misses cached", misses)
	}
}

// TestKeysBounded: the caches never grow past their bounds.
func TestKeysBounded(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	for i := range 300 {
		mustKey(t, st, &auth.Key{ProjectID: p.ID}, fmt.Sprintf("gh-bound-%d", i))
	}
	k := newKeys(t, st, auth.KeysOptions{MaxKeys: 128, MaxMisses: 64, MissBurst: 10_000})
	for i := range 300 {
		if _, err := k.Resolve(ctx, fmt.Sprintf("gh-bound-%d", i)); err != nil {
			t.Fatal(err)
		}
		k.Resolve(ctx, fmt.Sprintf("gh-bogus-%d", i))
	}
	// Bounds are per shard (64 shards), so the totals stay at or under
	// them rounded up to a multiple of 64.
	if keys, misses := k.CacheLen(); keys > 128 || misses > 64 || keys == 0 || misses == 0 {
		t.Fatalf("cache holds %d keys, %d misses; bounds 128, 64", keys, misses)
	}
	// Evicted keys still work: they are looked up again.
	for i := range 300 {
		if _, err := k.Resolve(ctx, fmt.Sprintf("gh-bound-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeysStoreDown: a store failure never locks out a cached key and
// never answers 401 for a key it could not check.
func TestKeysStoreDown(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	clk := newClock()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-cached-secret")
	mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-uncached-secret")
	sp := &spy{Store: st}
	k := newKeys(t, sp, auth.KeysOptions{Now: clk.Now, RefreshAfter: time.Minute, MaxAge: 5 * time.Minute})
	if _, err := k.Resolve(ctx, "gh-cached-secret"); err != nil {
		t.Fatal(err)
	}
	sp.fail.Store(true)

	for _, secret := range []string{"gh-uncached-secret", "gh-unknown-secret"} {
		_, err := k.Resolve(ctx, secret)
		if !isUnavailable(err) {
			t.Fatalf("%s with the store down: %v, want a 503 unavailable error", secret, err)
		}
		if errors.Is(err, auth.ErrBadKey) || !errors.Is(err, errDown) {
			t.Fatalf("%s: %v should wrap the store's error and not be ErrBadKey", secret, err)
		}
		if e := llm.AsError(err); e.RetryAfter <= 0 {
			t.Errorf("no Retry-After on %v", err)
		}
	}
	// Cached: served fresh, past RefreshAfter (a background refresh
	// fails), and past MaxAge (the foreground re-read fails).
	for _, step := range []time.Duration{0, 2 * time.Minute, 10 * time.Minute} {
		clk.Advance(step)
		if _, err := k.Resolve(ctx, "gh-cached-secret"); err != nil {
			t.Fatalf("cached key %v later, store down: %v", step, err)
		}
	}
	// The store comes back: the uncached key works, and is not stuck
	// behind a cached failure.
	sp.fail.Store(false)
	if _, err := k.Resolve(ctx, "gh-uncached-secret"); err != nil {
		t.Fatalf("store back: %v", err)
	}
}

// TestKeysRefresh: with the change feed silent (a missed notification),
// a cached key is re-read after RefreshAfter, in the background: the
// request that notices is served from the cache.
func TestKeysRefresh(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	clk := newClock()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	key := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-refresh-secret")
	sp := &spy{Store: st, changes: make(chan auth.Hash)} // never delivers
	k := newKeys(t, sp, auth.KeysOptions{Now: clk.Now, RefreshAfter: time.Minute, MaxAge: 10 * time.Minute})
	if _, err := k.Resolve(ctx, "gh-refresh-secret"); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeKey(ctx, key.ID, clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(59 * time.Second)
	if _, err := k.Resolve(ctx, "gh-refresh-secret"); err != nil {
		t.Fatalf("before RefreshAfter: %v", err)
	}
	if n := sp.lookups.Load(); n != 1 {
		t.Fatalf("%d lookups before RefreshAfter, want 1", n)
	}
	clk.Advance(time.Second)
	if _, err := k.Resolve(ctx, "gh-refresh-secret"); err != nil {
		t.Fatalf("the request that starts the refresh waited for it: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := k.Resolve(ctx, "gh-refresh-secret")
		if err == auth.ErrBadKey {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refresh did not catch the revocation: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if n := sp.lookups.Load(); n != 2 {
		t.Errorf("%d lookups, want 2", n)
	}
}

// TestKeysStaticFirst: static keys never reach the store, even when it is
// down, and are read-only.
func TestKeysStaticFirst(t *testing.T) {
	st := openSQLite(t)
	sp := &spy{Store: st}
	sp.fail.Store(true)
	k := newKeys(t, sp, auth.KeysOptions{}, auth.StaticKey{Secret: "gh-config-secret", Principal: auth.Principal{KeyID: "static:cfg"}})
	for range 10 {
		p, err := k.Resolve(context.Background(), "gh-config-secret")
		if err != nil || p.KeyID != "static:cfg" || !p.ReadOnly {
			t.Fatalf("%+v %v", p, err)
		}
	}
	if n := sp.lookups.Load(); n != 0 {
		t.Fatalf("static key made %d store lookups", n)
	}
	// A config reload swaps the table.
	k.SetStatic([]auth.StaticKey{{Secret: "gh-reloaded-secret", Principal: auth.Principal{KeyID: "static:new"}}})
	if p, err := k.Resolve(context.Background(), "gh-reloaded-secret"); err != nil || p.KeyID != "static:new" || !p.ReadOnly {
		t.Fatalf("after SetStatic: %+v %v", p, err)
	}
	if _, err := k.Resolve(context.Background(), "gh-config-secret"); !isUnavailable(err) {
		t.Fatalf("a static key the reload removed went on working (or skipped the store): %v", err)
	}
}

// TestKeysLastUsed: uses are written in batches by the flusher and on
// Close, never per request.
func TestKeysLastUsed(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	clk := newClock()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	a := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-used-a")
	b := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-used-b")
	idle := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-idle")
	k, err := auth.NewKeys(ctx, st, nil, auth.KeysOptions{Now: clk.Now, FlushEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for range 100 {
		k.Resolve(ctx, "gh-used-a")
	}
	t1 := clk.Now()
	if err := k.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Key(ctx, a.ID); err != nil || got.LastUsedAt == nil || !got.LastUsedAt.Equal(t1) {
		t.Fatalf("after a flush, last used %v (%v), want %v", got.LastUsedAt, err, t1)
	}
	clk.Advance(10 * time.Second)
	k.Resolve(ctx, "gh-used-a")
	k.Resolve(ctx, "gh-used-b")
	t2 := clk.Now()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  *auth.Key
		want *time.Time
	}{{a, &t2}, {b, &t2}, {idle, nil}} {
		got, err := st.Key(ctx, c.key.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, got.LastUsedAt); diff != "" {
			t.Errorf("%s last used (-want +got):\n%s", c.key.Name, diff)
		}
	}
}

// TestKeysClose: Close stops every goroutine Keys started, and so does
// the end of the context it was started with.
func TestKeysClose(t *testing.T) {
	st := openSQLite(t)
	p := mustProject(t, st, &auth.Project{Name: "p"})
	mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-close-secret")
	settle := func() int {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		return runtime.NumGoroutine()
	}
	before := settle()
	for _, viaCtx := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		k, err := auth.NewKeys(ctx, st, nil, auth.KeysOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			k.Resolve(ctx, "gh-close-secret")
			k.Resolve(ctx, "gh-missing-secret")
		}
		if viaCtx {
			cancel()
		}
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		cancel()
		deadline := time.Now().Add(10 * time.Second)
		for settle() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Fatalf("goroutines: %d before NewKeys, %d after Close (ctx canceled first: %v)\n%s",
					before, runtime.NumGoroutine(), viaCtx, buf[:runtime.Stack(buf, true)])
			}
		}
		// Cached keys still answer; lookups fail as unavailable.
		if _, err := k.Resolve(context.Background(), "gh-close-secret"); err != nil {
			t.Fatalf("cached key after Close: %v", err)
		}
		if _, err := k.Resolve(context.Background(), "gh-other-secret"); !isUnavailable(err) {
			t.Fatalf("lookup after Close: %v", err)
		}
	}
}

// TestKeysResubscribe: when the store ends the change feed early, Keys
// drops its cache and subscribes again.
func TestKeysResubscribe(t *testing.T) {
	st := openSQLite(t)
	ctx := context.Background()
	p := mustProject(t, st, &auth.Project{Name: "p"})
	key := mustKey(t, st, &auth.Key{ProjectID: p.ID}, "gh-resub-secret")
	sp := &spy{Store: st, changes: make(chan auth.Hash)}
	k := newKeys(t, sp, auth.KeysOptions{})
	if _, err := k.Resolve(ctx, "gh-resub-secret"); err != nil {
		t.Fatal(err)
	}
	ch := sp.changes
	sp.changes = nil // the next KeyChanges reaches the real store
	close(ch)
	if err := st.RevokeKey(ctx, key.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitBad(t, k, "gh-resub-secret", time.Second)
}

// A canceled caller stops waiting for a shared lookup at once.
func TestKeysCallerCanceled(t *testing.T) {
	st := openSQLite(t)
	sp := &spy{Store: st, gate: make(chan struct{})}
	k := newKeys(t, sp, auth.KeysOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := k.Resolve(ctx, "gh-slow-secret")
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindCanceled {
		t.Fatalf("canceled caller: %v", err)
	}
	close(sp.gate)
}
