package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/cache"
	"gatehouse/internal/limit"
	"gatehouse/internal/store/redis/redistest"
)

// TestOnRedisCluster runs the limiter's and the exact cache's tests again
// on the three-master Redis Cluster of scripts/test-services, through a
// redis+cluster:// URL. The cluster refuses a script whose keys hash to
// more than one slot (CROSSSLOT), so their passing shows every script's
// keys share their hash tag; the client follows MOVED to the node owning
// each tag, and reloads a script that node has not seen (NOSCRIPT).
//
// Left out: TestOneCommandPerAdmission and TestRedisDownPolicies, which
// run against a private single server and a proxy in front of one.
func TestOnRedisCluster(t *testing.T) {
	url := redistest.ClusterURL(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ExactRPM", TestExactRPM},
		{"ExactRPMThreeReplicas", TestExactRPMThreeReplicas},
		{"RefillFakeClock", TestRefillFakeClock},
		{"TokensAndSettle", TestTokensAndSettle},
		{"BudgetNeverOverspent", TestBudgetNeverOverspent},
		{"PeriodRollover", TestPeriodRollover},
		{"NoScriptRecovery", TestNoScriptRecovery},
		{"SeedRestoresLostCounters", TestSeedRestoresLostCounters},
		{"BudgetLeft", TestBudgetLeft},
		{"SpentMany", TestSpentMany},
		{"SpentManyFailure", TestSpentManyFailure},
		{"LostCountersAreRebuiltBeforeAdmitting", TestLostCountersAreRebuiltBeforeAdmitting},
		{"SettleAfterTheLoss", TestSettleAfterTheLoss},
		{"SweepReleasesUnsettledReservations", TestSweepReleasesUnsettledReservations},
		{"ReleaseAnAdmissionOfUnknownOutcome", TestReleaseAnAdmissionOfUnknownOutcome},
		{"SettlesBatched", TestSettlesBatched},
		{"SettleReplayAppliesNothing", TestSettleReplayAppliesNothing},
		{"SettleBatchesThreeReplicasExact", TestSettleBatchesThreeReplicasExact},
		{"FullSettleQueueWaits", TestFullSettleQueueWaits},
		{"CacheTier", TestCacheTier},
		{"CacheEntriesExpireInRedis", TestCacheEntriesExpireInRedis},
		{"CacheOddProjects", TestCacheOddProjects},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// testClient connects to GATEHOUSE_TEST_REDIS.
			t.Setenv("GATEHOUSE_TEST_REDIS", url)
			c := testClient(t)
			if c.Mode() != rueidis.ClientModeCluster {
				t.Fatalf("the client for %s is in %s mode, want cluster", url, c.Mode())
			}
			tc.run(t)
		})
	}
}

// deleteMatching deletes the keys matching pattern on every node c
// reaches (one on a single server, each master of a cluster), one DEL
// per key: a cluster refuses a DEL of keys in several slots.
func deleteMatching(c rueidis.Client, pattern string) {
	ctx := context.Background()
	for _, node := range c.Nodes() {
		keys, err := node.Do(ctx, node.B().Keys().Pattern(pattern).Build()).AsStrSlice()
		if err != nil {
			continue
		}
		for _, k := range keys {
			c.Do(ctx, c.B().Del().Key(k).Build())
		}
	}
}

// onEveryNode runs a keyless command (SCRIPT FLUSH, SCRIPT EXISTS) on
// every node c reaches, which the client would otherwise send to one
// node of a cluster, and returns the replies.
func onEveryNode(ctx context.Context, c rueidis.Client, cmd func(rueidis.Builder) rueidis.Completed) []rueidis.RedisResult {
	var out []rueidis.RedisResult
	for _, node := range c.Nodes() {
		out = append(out, node.Do(ctx, cmd(node.B())))
	}
	return out
}

// TestSlotsOfEveryKey asks the cluster for the slot of every key that
// one script call of the limiter or the exact cache touches, for tags,
// IDs and project names holding what could split them (braces, colons,
// nothing at all): each call's keys must share one slot. The cluster
// runs of the tests above would fail with CROSSSLOT too, but only for
// the names they happen to use.
func TestSlotsOfEveryKey(t *testing.T) {
	t.Setenv("GATEHOUSE_TEST_REDIS", redistest.ClusterURL(t))
	c := testClient(t)
	ctx := context.Background()
	slot := func(key string) int64 {
		n, err := c.Do(ctx, c.B().ClusterKeyslot().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	odd := []string{"proj_1", "", "}", "}x", "{", "{}", "a{b}c", "static:{x}", "~", "~7d"}
	groups := map[string][]string{}
	l := &Limiter{prefix: "gh:"}
	for _, name := range odd {
		tag := tagOf(&limit.Admission{Tag: name})
		b := &limit.Budget{Scope: limit.ScopeKey, ID: name + ":{id}", Period: limit.Month}
		groups["limiter, tag "+name] = []string{
			l.rateKey(tag, "rq", limit.ScopeKey, name+"{k}"),
			l.rateKey(tag, "rt", limit.ScopeKeyModel, limit.KeyModelID("k", "llama3:8b")),
			l.budgetKey(tag, b, "2031-01-01"),
			l.markerKey(tag, "batch-1"),
		}
	}
	cache := NewCache(c, "gh:")
	for _, name := range odd {
		groups["cache, project "+name] = []string{cache.entryKey(name, "k{1}"), cache.indexKey(name)}
	}
	for name, keys := range groups {
		want := slot(keys[0])
		for _, k := range keys[1:] {
			if got := slot(k); got != want {
				t.Errorf("%s: %q is in slot %d, %q in %d", name, keys[0], want, k, got)
			}
		}
	}
}

// TestCacheOddProjects: entries of projects whose names would make an
// empty hash tag (none, or one starting with '}') are stored, found and
// purged like any other, and the names that stand for them do not
// collide with real ones.
func TestCacheOddProjects(t *testing.T) {
	c := testClient(t)
	s := NewCache(c, testPrefix(t, c))
	ctx := context.Background()
	names := []string{"", "}", "}x", "~", "~7d", "7d"}
	for i, p := range names {
		e := &cache.Entry{Project: p, Completion: []byte(`{"n":` + strconv.Itoa(i) + `}`), Expires: time.Now().Add(time.Minute)}
		if err := s.PutEntry(ctx, "k", e); err != nil {
			t.Fatalf("put for project %q: %v", p, err)
		}
	}
	for i, p := range names {
		e, err := s.GetEntry(ctx, p, "k")
		if err != nil || e == nil || string(e.Completion) != `{"n":`+strconv.Itoa(i)+`}` {
			t.Fatalf("get for project %q: %+v %v", p, e, err)
		}
	}
	if n, err := s.PurgeEntries(ctx, "}"); err != nil || n != 1 {
		t.Fatalf("purge of project %q: %d %v, want 1", "}", n, err)
	}
	if e, _ := s.GetEntry(ctx, "}x", "k"); e == nil {
		t.Fatal("purging project } took }x's entry")
	}
	if n, err := s.PurgeEntries(ctx, ""); err != nil || n != len(names)-1 {
		t.Fatalf("purge of all: %d %v, want %d", n, err, len(names)-1)
	}
}

// TestClusterReshard moves the slot of a tag to another master while a
// limiter counts against it, the way redis-cli --cluster reshard does
// (IMPORTING, MIGRATING, MIGRATE, SETSLOT NODE): admissions keep working
// while the slot is half moved (the client follows ASK) and after it
// (MOVED), on a node that has not seen the script, and no count is lost.
func TestClusterReshard(t *testing.T) {
	url := redistest.ClusterURL(t)
	c, err := NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	clk := newClock(t0)
	prefix := testPrefix(t, c)
	l := newLimiter(t, c, Options{Prefix: prefix, Now: clk.Now, Timeout: 10 * time.Second})
	tag := "reshard-" + prefix[len("ghtest:"):len(prefix)-1]
	a := limit.Admission{Tag: tag, Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k", RPM: 10}}}
	admit := func(step string, n int) {
		t.Helper()
		for i := range n {
			if d, err := l.Admit(ctx, a); err != nil || !d.Allowed {
				t.Fatalf("%s, admission %d: %v %+v", step, i+1, err, d.Refused)
			}
		}
	}
	admit("before the move", 5)

	slot, err := c.Do(ctx, c.B().ClusterKeyslot().Key("{"+tag+"}").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	from, to := slotOwners(t, c, slot)
	src, dst := c.Nodes()[from.addr], c.Nodes()[to.addr]
	run := func(node rueidis.Client, what string, cmd rueidis.Completed) {
		t.Helper()
		if err := node.Do(ctx, cmd).Error(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	run(dst, "IMPORTING", dst.B().ClusterSetslot().Slot(slot).Importing().NodeId(from.id).Build())
	run(src, "MIGRATING", src.B().ClusterSetslot().Slot(slot).Migrating().NodeId(to.id).Build())
	admit("slot migrating, keys still on the source", 1)
	keys, err := src.Do(ctx, src.B().ClusterGetkeysinslot().Slot(slot).Count(100).Build()).AsStrSlice()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys in slot %d: %v %v", slot, keys, err)
	}
	// MIGRATE's key slot is "" when it moves KEYS: built as arbitrary
	// words, so the client does not route it by that empty key.
	host, port, _ := strings.Cut(to.addr, ":")
	run(src, "MIGRATE", src.B().Arbitrary("MIGRATE", host, port, "", "0", "5000", "KEYS").Args(keys...).Build())
	admit("keys moved, slot still migrating (ASK)", 1)
	for _, node := range c.Nodes() {
		run(node, "SETSLOT NODE", node.B().ClusterSetslot().Slot(slot).Node().NodeId(to.id).Build())
	}
	admit("slot moved (MOVED)", 3)
	if d, err := l.Admit(ctx, a); err != nil || d.Allowed {
		t.Fatalf("the 11th admission against rpm=10: %v, allowed %v: counts were lost in the move", err, d.Allowed)
	}
	if n, err := dst.Do(ctx, dst.B().ClusterCountkeysinslot().Slot(slot).Build()).AsInt64(); err != nil || n == 0 {
		t.Fatalf("the new owner holds %d keys of slot %d (%v)", n, slot, err)
	}
}

type clusterNode struct{ id, addr string }

// slotOwners returns the master serving slot and another master.
func slotOwners(t *testing.T, c rueidis.Client, slot int64) (owner, other clusterNode) {
	t.Helper()
	ranges, err := c.Do(context.Background(), c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	var masters []clusterNode
	for _, r := range ranges {
		v, err := r.ToArray()
		if err != nil || len(v) < 3 {
			t.Fatalf("CLUSTER SLOTS entry %v: %v", v, err)
		}
		lo, _ := v[0].AsInt64()
		hi, _ := v[1].AsInt64()
		m, _ := v[2].ToArray()
		ip, _ := m[0].ToString()
		port, _ := m[1].AsInt64()
		id, _ := m[2].ToString()
		n := clusterNode{id: id, addr: ip + ":" + strconv.FormatInt(port, 10)}
		if lo <= slot && slot <= hi {
			owner = n
		}
		masters = append(masters, n)
	}
	for _, n := range masters {
		if n.id != owner.id {
			other = n
		}
	}
	if owner.id == "" || other.id == "" {
		t.Fatalf("no owner and other master of slot %d in CLUSTER SLOTS", slot)
	}
	return owner, other
}
