// Package storetest is the contract every auth.Store backend passes: one
// suite, run by each backend's own tests against a real database, so the
// admin API and the auth cache can rely on the same behaviour from SQLite
// on a laptop and PostgreSQL in a cluster.
//
// It imports the testing package and is meant only for tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
)

// Opener returns a new, empty store for one test; the test closes it, and
// the opener cleans up what else it made (files, schemas) with t.Cleanup.
type Opener func(t *testing.T) auth.Store

// Option adds optional parts of the contract.
type Option func(*suite)

// Replica gives the suite a second Store on the same database as s, so it
// can check that key changes made through one reach the other's
// KeyChanges within a second (cluster backends).
func Replica(open func(t *testing.T, s auth.Store) auth.Store) Option {
	return func(su *suite) { su.replica = open }
}

type suite struct {
	open    Opener
	replica func(t *testing.T, s auth.Store) auth.Store
}

// Run runs the whole contract, each case on a fresh store from open.
func Run(t *testing.T, open Opener, opts ...Option) {
	su := &suite{open: open}
	for _, o := range opts {
		o(su)
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, s auth.Store)
	}{
		{"Projects", testProjects},
		{"ProjectConflicts", testProjectConflicts},
		{"DeleteProject", testDeleteProject},
		{"Keys", testKeys},
		{"KeyConflicts", testKeyConflicts},
		{"RotateKey", testRotateKey},
		{"RevokeKey", testRevokeKey},
		{"TouchKeys", testTouchKeys},
		{"Times", testTimes},
		{"Customers", testCustomers},
		{"Pagination", testPagination},
		{"PageCap", testPageCap},
		{"ListFilters", testListFilters},
		{"ConcurrentWriters", testConcurrentWriters},
		{"KeyChanges", testKeyChanges},
		{"KeyChangesEnd", testKeyChangesEnd},
		{"ContextCancelled", testContextCancelled},
		{"Prices", testPrices},
		{"Sessions", testSessions},
		{"Audit", testAudit},
		{"Responses", testResponses},
		{"UsageWrites", testUsageWrites},
		{"UsageReads", testUsageReads},
		{"UsageRoundTrip", testUsageRoundTrip},
		{"UsageLatency", testUsageLatency},
		{"UsageReadsFresh", fresh(testUsageReads)},
		{"UsageLatencyFresh", fresh(testUsageLatency)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			c.fn(t, s)
		})
	}
	if su.replica != nil {
		t.Run("KeyChangesAcrossReplicas", func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			peer := su.replica(t, s)
			t.Cleanup(func() { peer.Close() })
			testReplicaChanges(t, s, peer)
		})
	}
}

// fresh runs a usage test with its writes going where the sink sends
// them: a batch of records never handed to the store before through
// WriteFreshRecords, one that repeats any (a replay: the reads test
// writes some twice) through WriteRecords. The fresh path must store and
// roll up what WriteRecords does.
func fresh(test func(t *testing.T, s auth.Store)) func(t *testing.T, s auth.Store) {
	return func(t *testing.T, s auth.Store) {
		fs, ok := s.(account.FreshRecordStore)
		q, ok2 := s.(account.Querier)
		if !ok || !ok2 {
			t.Fatalf("%T does not implement account.FreshRecordStore and account.Querier", s)
		}
		fw := &freshWrites{Store: s, FreshRecordStore: fs, Querier: q, handed: map[string]bool{}}
		test(t, fw)
		if fw.fresh == 0 {
			t.Fatal("no batch went through WriteFreshRecords")
		}
	}
}

// freshWrites is a store whose WriteRecords is its WriteFreshRecords for
// records it was never handed.
type freshWrites struct {
	auth.Store
	account.FreshRecordStore
	account.Querier
	handed map[string]bool
	fresh  int // batches written fresh
}

func (f *freshWrites) WriteRecords(ctx context.Context, rs []account.Record) error {
	again := false
	for _, r := range rs {
		again = again || f.handed[r.RequestID]
		f.handed[r.RequestID] = true
	}
	if again {
		return f.FreshRecordStore.WriteRecords(ctx, rs)
	}
	f.fresh++
	return f.WriteFreshRecords(ctx, rs)
}

// ctxFor bounds a contract step so a hung store fails the test rather
// than the package timeout; generous, since under -race on a loaded
// 2-core machine the usage reads over many records took past 30 s.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// hashOf makes a distinct, recognisable hash for a test key.
func hashOf(s string) auth.Hash { return auth.HashKey("storetest-" + s) }

func mustProject(t *testing.T, s auth.Store, name string) *auth.Project {
	t.Helper()
	p := &auth.Project{Name: name}
	if err := s.CreateProject(ctxFor(t), p); err != nil {
		t.Fatalf("CreateProject(%q): %v", name, err)
	}
	return p
}

func mustKey(t *testing.T, s auth.Store, projectID, name string) *auth.Key {
	t.Helper()
	k := &auth.Key{ProjectID: projectID, Name: name, Hash: hashOf(projectID + "/" + name), Prefix: "gh-" + name}
	if err := s.CreateKey(ctxFor(t), k); err != nil {
		t.Fatalf("CreateKey(%q): %v", name, err)
	}
	return k
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want one wrapping %q", what, err, target)
	}
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// checkStamp checks a time a store assigned: recent, UTC, microseconds.
func checkStamp(t *testing.T, what string, ts time.Time) {
	t.Helper()
	if ts.Location() != time.UTC {
		t.Errorf("%s = %v: location %v, want UTC", what, ts, ts.Location())
	}
	if ts.Nanosecond()%1000 != 0 {
		t.Errorf("%s = %v: finer than a microsecond", what, ts)
	}
	if d := time.Since(ts); d < -time.Minute || d > time.Minute {
		t.Errorf("%s = %v: not about now", what, ts)
	}
}

func testProjects(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	on := true
	p := &auth.Project{
		Name:      "acme",
		Limits:    auth.Limits{RPM: 60, TPM: 100000},
		Budget:    &auth.Budget{USD: 12.5, Period: auth.PeriodMonth},
		Models:    []string{"gpt-4o-mini", "claude-3-5-haiku-latest"},
		Providers: []string{"openai", "anthropic"},
		Labels:    map[string]string{"team": "search", "env": "prod"},
		Cache:     &auth.ProjectCache{Exact: auth.ExactCacheOverride{Enabled: &on, TTLSeconds: 600}},
		LogBodies: true,
	}
	if err := s.CreateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	if len(p.ID) < 10 || p.ID[:5] != "proj_" {
		t.Errorf("ID = %q, want proj_…", p.ID)
	}
	checkStamp(t, "CreatedAt", p.CreatedAt)
	if !p.UpdatedAt.Equal(p.CreatedAt) {
		t.Errorf("UpdatedAt %v != CreatedAt %v on create", p.UpdatedAt, p.CreatedAt)
	}
	got, err := s.Project(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Project", p, got)
	got, err = s.ProjectByName(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "ProjectByName", p, got)

	// A bare project round-trips its zero values (nil budget, cache, lists).
	bare := mustProject(t, s, "bare")
	got, err = s.Project(ctx, bare.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "bare project", bare, got)

	time.Sleep(2 * time.Millisecond) // so UpdatedAt can move on
	off := false
	p.Name, p.RPM, p.Budget, p.Models, p.Labels, p.Cache, p.LogBodies = "acme-2", 0, nil, nil, map[string]string{"x": "y"},
		&auth.ProjectCache{Exact: auth.ExactCacheOverride{Enabled: &off}}, false
	p.Providers = []string{"ollama"}
	if err := s.UpdateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	if !p.UpdatedAt.After(p.CreatedAt) {
		t.Errorf("UpdatedAt %v not after CreatedAt %v", p.UpdatedAt, p.CreatedAt)
	}
	checkStamp(t, "UpdatedAt", p.UpdatedAt)
	got, err = s.Project(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "updated project", p, got)
	if _, err := s.ProjectByName(ctx, "acme"); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("old name still found: %v", err)
	}

	wantErr(t, "Project(unknown)", second(s.Project(ctx, "proj_nope")), auth.ErrNotFound)
	wantErr(t, "ProjectByName(unknown)", second(s.ProjectByName(ctx, "nope")), auth.ErrNotFound)
	wantErr(t, "UpdateProject(unknown)", s.UpdateProject(ctx, &auth.Project{ID: "proj_nope", Name: "zzz"}), auth.ErrNotFound)
	wantErr(t, "DeleteProject(unknown)", s.DeleteProject(ctx, "proj_nope"), auth.ErrNotFound)
}

func second[T any](_ T, err error) error { return err }

func testProjectConflicts(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	mustProject(t, s, "one")
	two := mustProject(t, s, "two")
	wantErr(t, "duplicate CreateProject", s.CreateProject(ctx, &auth.Project{Name: "one"}), auth.ErrConflict)
	two.Name = "one"
	wantErr(t, "UpdateProject to a taken name", s.UpdateProject(ctx, two), auth.ErrConflict)
	got, err := s.Project(ctx, two.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "two" {
		t.Errorf("failed update changed the name to %q", got.Name)
	}
}

func testDeleteProject(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "doomed")
	k := mustKey(t, s, p.ID, "live")
	past := time.Now().Add(-time.Hour)
	expired := &auth.Key{ProjectID: p.ID, Name: "old", Hash: hashOf("expired"), Prefix: "gh-old", ExpiresAt: &past}
	if err := s.CreateKey(ctx, expired); err != nil {
		t.Fatal(err)
	}
	c := &auth.Customer{ProjectID: p.ID, ExternalID: "user-1", OnExceed: auth.OnExceedBlock}
	if err := s.CreateCustomer(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeleteProject with an active key", s.DeleteProject(ctx, p.ID), auth.ErrInUse)
	if _, err := s.Project(ctx, p.ID); err != nil {
		t.Fatalf("refused delete removed the project: %v", err)
	}
	if err := s.RevokeKey(ctx, k.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteProject(ctx, p.ID); err != nil {
		t.Fatalf("DeleteProject with only revoked and expired keys: %v", err)
	}
	wantErr(t, "Project after delete", second(s.Project(ctx, p.ID)), auth.ErrNotFound)
	wantErr(t, "Key after delete", second(s.Key(ctx, k.ID)), auth.ErrNotFound)
	_, _, err := s.KeyByHash(ctx, k.Hash)
	wantErr(t, "KeyByHash after delete", err, auth.ErrNotFound)
	wantErr(t, "Customer after delete", second(s.Customer(ctx, c.ID)), auth.ErrNotFound)
	wantErr(t, "second DeleteProject", s.DeleteProject(ctx, p.ID), auth.ErrNotFound)
}

func testCustomers(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "app")
	other := mustProject(t, s, "other-app")
	daily, monthly := 1.25, 30.0
	c := &auth.Customer{
		ProjectID: p.ID, ExternalID: "user-42", Name: "Ada",
		DailyUSD: &daily, MonthlyUSD: &monthly,
		OnExceed: auth.OnExceedDowngrade, DowngradeModel: "gpt-4o-mini",
		Labels: map[string]string{"plan": "free"},
	}
	if err := s.CreateCustomer(ctx, c); err != nil {
		t.Fatal(err)
	}
	if len(c.ID) < 10 || c.ID[:4] != "cus_" {
		t.Errorf("ID = %q, want cus_…", c.ID)
	}
	checkStamp(t, "CreatedAt", c.CreatedAt)
	got, err := s.Customer(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "Customer", c, got)
	got, err = s.CustomerByExternalID(ctx, p.ID, "user-42")
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "CustomerByExternalID", c, got)
	wantErr(t, "CustomerByExternalID in another project", second(s.CustomerByExternalID(ctx, other.ID, "user-42")), auth.ErrNotFound)

	wantErr(t, "duplicate external id", s.CreateCustomer(ctx, &auth.Customer{ProjectID: p.ID, ExternalID: "user-42", OnExceed: auth.OnExceedBlock}), auth.ErrConflict)
	same := &auth.Customer{ProjectID: other.ID, ExternalID: "user-42", OnExceed: auth.OnExceedBlock}
	if err := s.CreateCustomer(ctx, same); err != nil {
		t.Errorf("same external id in another project: %v", err)
	}
	wantErr(t, "customer of an unknown project", s.CreateCustomer(ctx, &auth.Customer{ProjectID: "proj_nope", ExternalID: "x", OnExceed: auth.OnExceedBlock}), auth.ErrNotFound)

	time.Sleep(2 * time.Millisecond)
	c.Name, c.DailyUSD, c.OnExceed, c.DowngradeModel, c.Labels = "Ada L.", nil, auth.OnExceedBlock, "", nil
	if err := s.UpdateCustomer(ctx, c); err != nil {
		t.Fatal(err)
	}
	if !c.UpdatedAt.After(c.CreatedAt) {
		t.Errorf("UpdatedAt %v not after CreatedAt %v", c.UpdatedAt, c.CreatedAt)
	}
	got, err = s.Customer(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "updated customer", c, got)
	dup := *c
	dup.ID, dup.ExternalID = "", "user-43"
	if err := s.CreateCustomer(ctx, &dup); err != nil {
		t.Fatal(err)
	}
	dup.ExternalID = "user-42"
	wantErr(t, "UpdateCustomer to a taken external id", s.UpdateCustomer(ctx, &dup), auth.ErrConflict)
	wantErr(t, "UpdateCustomer(unknown)", s.UpdateCustomer(ctx, &auth.Customer{ID: "cus_nope", ExternalID: "q"}), auth.ErrNotFound)

	if err := s.DeleteCustomer(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "Customer after delete", second(s.Customer(ctx, c.ID)), auth.ErrNotFound)
	wantErr(t, "DeleteCustomer again", s.DeleteCustomer(ctx, c.ID), auth.ErrNotFound)
	wantErr(t, "Customer(unknown)", second(s.Customer(ctx, "cus_nope")), auth.ErrNotFound)
}

// testTimes checks that times a caller sets come back exactly, as the
// stores keep them: in UTC and to the microsecond, whatever zone and
// precision they were given in, and that the record passed in is brought
// to the same value.
func testTimes(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	p := mustProject(t, s, "clock")
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	expires := time.Date(2031, 5, 6, 7, 8, 9, 123456789, zone)
	k := &auth.Key{ProjectID: p.ID, Name: "timed", Hash: hashOf("timed"), Prefix: "gh-t", ExpiresAt: &expires}
	if err := s.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2031, 5, 6, 1, 38, 9, 123456000, time.UTC)
	check := func(what string, got *time.Time) {
		t.Helper()
		switch {
		case got == nil:
			t.Errorf("%s = nil, want %v", what, want)
		case !got.Equal(want) || got.Location() != time.UTC || got.Nanosecond() != want.Nanosecond():
			t.Errorf("%s = %v (%v), want %v exactly", what, got, got.Location(), want)
		}
	}
	check("ExpiresAt of the created record", k.ExpiresAt)
	got, err := s.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("ExpiresAt read back", got.ExpiresAt)
	diff(t, "key", k, got)

	revoked := time.Date(2030, 1, 2, 3, 4, 5, 999999999, zone)
	if err := s.RevokeKey(ctx, k.ID, revoked); err != nil {
		t.Fatal(err)
	}
	want = time.Date(2030, 1, 1, 21, 34, 5, 999999000, time.UTC)
	got, err = s.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("RevokedAt read back", got.RevokedAt)

	used := time.Date(2029, 2, 3, 4, 5, 6, 1000, zone)
	if err := s.TouchKeys(ctx, map[string]time.Time{k.ID: used}); err != nil {
		t.Fatal(err)
	}
	want = used.UTC()
	got, err = s.Key(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	check("LastUsedAt read back", got.LastUsedAt)

	// Store-assigned times round-trip exactly too.
	if !got.CreatedAt.Equal(k.CreatedAt) || got.CreatedAt.Nanosecond() != k.CreatedAt.Nanosecond() {
		t.Errorf("CreatedAt read back %v, created %v", got.CreatedAt, k.CreatedAt)
	}
}

func testPagination(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	const n = 25
	want := map[string]bool{}
	for i := range n {
		p := mustProject(t, s, fmt.Sprintf("p%02d", i))
		want[p.ID] = true
	}
	var seen []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > n {
			t.Fatal("pagination does not end")
		}
		page, err := s.Projects(ctx, auth.Page{After: after, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 10 {
			t.Fatalf("page of %d, limit 10", len(page))
		}
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			if p.ID <= after {
				t.Fatalf("ID %q after %q: order not by ascending ID", p.ID, after)
			}
			after = p.ID
			seen = append(seen, p.ID)
		}
	}
	if len(seen) != n {
		t.Fatalf("listed %d projects, want %d", len(seen), n)
	}
	for _, id := range seen {
		if !want[id] {
			t.Errorf("listed unknown project %q", id)
		}
		delete(want, id)
	}
	// IDs begin with the creation time in milliseconds, so a record made
	// a few milliseconds after the others lists last.
	time.Sleep(3 * time.Millisecond)
	p := mustProject(t, s, "last")
	all, err := s.Projects(ctx, auth.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n+1 {
		t.Fatalf("Limit 0 listed %d, want all %d", len(all), n+1)
	}
	if all[n].ID != p.ID {
		t.Errorf("last listed %q, last created %q: IDs do not follow creation order", all[n].ID, p.ID)
	}
}

// testPageCap checks that no page exceeds MaxPageSize however much is asked.
func testPageCap(t *testing.T, s auth.Store) {
	if testing.Short() {
		t.Skip("creates more than MaxPageSize customers")
	}
	ctx := ctxFor(t)
	p := mustProject(t, s, "crowd")
	for i := range auth.MaxPageSize + 1 {
		c := &auth.Customer{ProjectID: p.ID, ExternalID: fmt.Sprintf("u%d", i), OnExceed: auth.OnExceedBlock}
		if err := s.CreateCustomer(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, limit := range []int{0, -1, auth.MaxPageSize + 1, 1 << 30} {
		got, err := s.Customers(ctx, p.ID, auth.Page{Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != auth.MaxPageSize {
			t.Errorf("Limit %d: page of %d, want MaxPageSize (%d)", limit, len(got), auth.MaxPageSize)
		}
	}
	rest, err := s.Customers(ctx, p.ID, auth.Page{After: "", Limit: 2})
	if err != nil || len(rest) != 2 {
		t.Fatalf("Limit 2: %d, %v", len(rest), err)
	}
}

func testListFilters(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	a, b := mustProject(t, s, "a"), mustProject(t, s, "b")
	for i := range 3 {
		mustKey(t, s, a.ID, fmt.Sprintf("a%d", i))
		if err := s.CreateCustomer(ctx, &auth.Customer{ProjectID: a.ID, ExternalID: fmt.Sprint(i), OnExceed: auth.OnExceedBlock}); err != nil {
			t.Fatal(err)
		}
	}
	mustKey(t, s, b.ID, "b0")
	if err := s.CreateCustomer(ctx, &auth.Customer{ProjectID: b.ID, ExternalID: "0", OnExceed: auth.OnExceedBlock}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		project string
		want    int
	}{{a.ID, 3}, {b.ID, 1}, {"", 4}, {"proj_nope", 0}} {
		keys, err := s.Keys(ctx, tc.project, auth.Page{})
		if err != nil {
			t.Fatal(err)
		}
		cus, err := s.Customers(ctx, tc.project, auth.Page{})
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != tc.want || len(cus) != tc.want {
			t.Errorf("project %q: %d keys, %d customers, want %d", tc.project, len(keys), len(cus), tc.want)
		}
		for _, k := range keys {
			if tc.project != "" && k.ProjectID != tc.project {
				t.Errorf("Keys(%q) listed a key of %q", tc.project, k.ProjectID)
			}
		}
		for _, c := range cus {
			if tc.project != "" && c.ProjectID != tc.project {
				t.Errorf("Customers(%q) listed a customer of %q", tc.project, c.ProjectID)
			}
		}
	}
	// Search: the stores filter as auth.KeyMatches does, within a
	// project or not, and page the matches.
	mustKey(t, s, b.ID, "Billing-Prod")
	all, err := s.Keys(ctx, "", auth.Page{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		project, search string
		want            int
	}{{"", "A1", 1}, {"", "gh-a", 3}, {"", "PROD", 1}, {"", "-", 1}, {"", all[0].ID, 1}, {"", all[0].ID[:4], 5},
		{b.ID, "a", 0}, {b.ID, "bill", 1}, {"", "nothing", 0}, {"", "%", 0}, {"", "_", 0}} {
		got, err := s.Keys(ctx, tc.project, auth.Page{Search: tc.search})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, k := range all {
			if auth.KeyMatches(&k, tc.search) && (tc.project == "" || k.ProjectID == tc.project) {
				want = append(want, k.ID)
			}
		}
		var ids []string
		for _, k := range got {
			ids = append(ids, k.ID)
		}
		if len(ids) != tc.want || !slices.Equal(ids, want) {
			t.Errorf("Keys(%q, search %q) = %v, want %d: %v", tc.project, tc.search, ids, tc.want, want)
		}
	}
	page, err := s.Keys(ctx, "", auth.Page{Search: "gh-a", Limit: 2})
	if err != nil || len(page) != 2 {
		t.Fatalf("first page of a search: %v, %v", page, err)
	}
	if rest, err := s.Keys(ctx, "", auth.Page{Search: "gh-a", After: page[1].ID}); err != nil || len(rest) != 1 {
		t.Errorf("second page of a search: %v, %v", rest, err)
	}

	// Keys page within a project.
	first, err := s.Keys(ctx, a.ID, auth.Page{Limit: 2})
	if err != nil || len(first) != 2 {
		t.Fatalf("first page: %d keys, %v", len(first), err)
	}
	rest, err := s.Keys(ctx, a.ID, auth.Page{After: first[1].ID, Limit: 2})
	if err != nil || len(rest) != 1 || rest[0].ID <= first[1].ID {
		t.Fatalf("second page: %v, %v", rest, err)
	}
}
