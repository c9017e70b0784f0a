package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"gatehouse/internal/mockllm"
	"gatehouse/internal/store/redis"
	"gatehouse/internal/store/redis/redistest"
)

// TestOnRedisCluster runs the cross-replica tests again with storage.redis
// a redis+cluster:// URL of the three-master Redis Cluster that
// scripts/test-services starts: exact limits over three processes, the
// exact cache shared (and purged) across replicas, and a key revoked on
// one replica refused on another.
func TestOnRedisCluster(t *testing.T) {
	url := redistest.ClusterURL(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ExactRPMThreeProcesses", TestLimitsExactRPMThreeProcessesOneRedis},
		{"ExactCacheSharedByReplicas", TestExactCacheSharedByReplicas},
		{"Revocation", TestClusterRevocation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// clusterStorage and clusterDSN read GATEHOUSE_TEST_REDIS.
			t.Setenv("GATEHOUSE_TEST_REDIS", url)
			tc.run(t)
		})
	}
}

// TestRedisSeedList: storage.redis written as a YAML list of the
// cluster's nodes puts the gateway in cluster mode on that cluster, and
// its rate limit holds.
func TestRedisSeedList(t *testing.T) {
	seeds := redistest.ClusterSeeds(t)
	prefix := uniquePrefix()
	storage := fmt.Sprintf("storage:\n  postgres: '%s'\n  redis:\n    - %s\nlimits: {redis_prefix: '%s', redis_timeout: 10s}\n",
		testPostgres(t), strings.Join(seeds, "\n    - "), prefix)
	checkLimitOn(t, storage, redistest.ClusterURL(t), prefix)
}

// TestRedisSentinel: with storage.redis a redis+sentinel:// URL, which
// names only a Sentinel, the gateway counts on the master the Sentinel
// reports.
func TestRedisSentinel(t *testing.T) {
	pg := testPostgres(t)
	s := redistest.StartSentinel(t)
	prefix := uniquePrefix()
	storage := fmt.Sprintf("storage: {redis: '%s', postgres: '%s'}\nlimits: {redis_prefix: '%s', redis_timeout: 10s}\n",
		s.URL, pg, prefix)
	checkLimitOn(t, storage, "redis://"+s.Master, prefix)
}

func testPostgres(t *testing.T) string {
	t.Helper()
	pg := os.Getenv("GATEHOUSE_TEST_POSTGRES")
	if pg == "" {
		t.Fatal(`GATEHOUSE_TEST_POSTGRES is not set: run eval "$(scripts/test-services start)" first`)
	}
	return pg
}

// checkLimitOn starts a gateway with the storage section given and a key
// of rpm 5, sends it 7 requests, and asserts 5 were admitted and that
// the counters are in the Redis at url, under prefix.
func checkLimitOn(t *testing.T, storage, url, prefix string) {
	t.Helper()
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	gw := startGateway(t, limitsConfig(up, "  - {key: gh-rpm-5-key, name: five, project: qa, rpm: 5}\n", storage))
	out, took := burst(t, 7, []openai.Client{burstClient(gw.URL, "gh-rpm-5-key")}, "chat")
	ok := 0
	for _, o := range out {
		switch o.status {
		case 200:
			ok++
		case 429:
		default:
			t.Fatalf("status %d: %s (logs: %s)", o.status, o.msg, gw.Logs.String())
		}
	}
	// rpm=5 refills a request every 12s: a burst this short gets none.
	if ok != 5 {
		t.Fatalf("%d of 7 admitted in %v against rpm=5, want 5", ok, took)
	}
	c, err := redis.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	for _, node := range c.Nodes() {
		keys, err := node.Do(context.Background(), node.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		n += len(keys)
	}
	if n == 0 {
		t.Fatalf("no key under %s in the Redis at %s: the gateway counted elsewhere", prefix, url)
	}
}
