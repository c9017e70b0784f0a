package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ClusterSeeds are the host:port addresses of the three-master Redis
// Cluster that scripts/test-services starts (GATEHOUSE_TEST_REDIS_CLUSTER).
// Its absence fails the test: a cluster test that skipped would prove
// nothing.
func ClusterSeeds(t testing.TB) []string {
	t.Helper()
	s := os.Getenv("GATEHOUSE_TEST_REDIS_CLUSTER")
	if s == "" {
		t.Fatal("GATEHOUSE_TEST_REDIS_CLUSTER is not set: this test needs the Redis Cluster that `make test` starts; " +
			"to run it by hand: eval \"$(scripts/test-services start)\" and go test again")
	}
	return strings.Split(s, ",")
}

// ClusterURL is the redis+cluster:// URL of ClusterSeeds.
func ClusterURL(t testing.TB) string {
	t.Helper()
	return "redis+cluster://" + strings.Join(ClusterSeeds(t), ",")
}

// Sentinel is a Redis master with one replica, watched by one Sentinel,
// all private to the test.
type Sentinel struct {
	// URL is the redis+sentinel:// URL of the master, naming the Sentinel
	// only.
	URL string
	// Master and Replica are the servers' host:port as started; after a
	// failover the replica is the master.
	Master, Replica string
	// Sentinel is the Sentinel's host:port.
	Sentinel string
}

// MasterName is the name the Sentinel knows the master by.
const MasterName = "gatehouse-test"

// StartSentinel runs a master, its replica and a Sentinel monitoring them
// (redis-server --sentinel, as Debian's redis-sentinel does), stopped when
// the test ends. It returns once the Sentinel knows both servers, so a
// failover can be asked for at once.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	// No wait for more replicas before the first sync (5s by default).
	s := &Sentinel{Master: serve(t, "", "--repl-diskless-sync-delay", "0")}
	_, port, _ := strings.Cut(s.Master, ":")
	s.Replica = serve(t, "", "--replicaof", "127.0.0.1", port)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A replica the Sentinel first sees unsynced is no candidate for
	// promotion until its next look, ten seconds later.
	waitFor(t, ctx, s.Replica, "the replica to sync", []string{"INFO", "replication"}, func(reply string) bool {
		return strings.Contains(reply, "master_link_status:up")
	})
	// The Sentinel rewrites its config file as it learns the topology.
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	rules := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s 1\nsentinel down-after-milliseconds %[1]s 2000\nsentinel failover-timeout %[1]s 5000\n",
		MasterName, port)
	if err := os.WriteFile(conf, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Sentinel = serve(t, conf, "--sentinel")
	s.URL = "redis+sentinel://" + s.Sentinel + "/" + MasterName
	_, rport, _ := strings.Cut(s.Replica, ":")
	waitFor(t, ctx, s.Sentinel, "the Sentinel to see the replica", []string{"SENTINEL", "REPLICAS", MasterName}, func(reply string) bool {
		return strings.Contains(reply, "\n"+rport+"\n") && strings.Contains(reply, "master-link-status\nok")
	})
	return s
}

// waitFor runs a command on addr until ok accepts its reply, or fails the
// test when ctx ends, saying it waited for what.
func waitFor(t testing.TB, ctx context.Context, addr, what string, cmd []string, ok func(reply string) bool) {
	t.Helper()
	for {
		reply, err := command(ctx, addr, cmd...)
		if err == nil && ok(reply) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("waited in vain for %s (%s on %s: %q, %v)", what, strings.Join(cmd, " "), addr, reply, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Failover has the Sentinel promote the replica, and returns once the
// Sentinel names it as the master (clients learn it from the Sentinel's
// +switch-master event, or their next poll of it).
func (s *Sentinel) Failover(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if reply, err := command(ctx, s.Sentinel, "SENTINEL", "FAILOVER", MasterName); err != nil || strings.TrimSpace(reply) != "OK" {
		t.Fatalf("SENTINEL FAILOVER: %q %v", reply, err)
	}
	_, port, _ := strings.Cut(s.Replica, ":")
	waitFor(t, ctx, s.Sentinel, "the Sentinel to promote "+s.Replica, []string{"SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName}, func(reply string) bool {
		f := strings.Fields(reply)
		return len(f) == 2 && f[1] == port
	})
}

// command runs one command with redis-cli on addr and returns its reply
// as redis-cli prints it.
func command(ctx context.Context, addr string, args ...string) (string, error) {
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", host, "-p", port}, args...)...).CombinedOutput()
	return string(out), err
}
