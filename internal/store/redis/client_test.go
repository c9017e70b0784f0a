package redis

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"gatehouse/internal/config"
	"gatehouse/internal/limit"
	"gatehouse/internal/provider"
	"gatehouse/internal/store/redis/redistest"
)

func TestClientOption(t *testing.T) {
	type want struct {
		Mode      rueidis.ClientMode
		Addrs     []string
		User      string
		Password  string
		MasterSet string
		DB        int
	}
	tests := []struct {
		url  string
		want want
	}{
		{"redis://127.0.0.1:6379/2", want{Mode: rueidis.ClientModeStandalone, Addrs: []string{"127.0.0.1:6379"}, DB: 2}},
		{"rediss://u:p@cache:6380", want{Mode: rueidis.ClientModeStandalone, Addrs: []string{"cache:6380"}, User: "u", Password: "p"}},
		{"redis+cluster://10.0.0.1:7001,10.0.0.2:7002", want{Mode: rueidis.ClientModeCluster, Addrs: []string{"10.0.0.1:7001", "10.0.0.2:7002"}}},
		{"redis+cluster://:s3cr%40t@a:1/", want{Mode: rueidis.ClientModeCluster, Addrs: []string{"a:1"}, Password: "s3cr@t"}},
		{"redis+cluster://u:p@[::1]:7001,[::1]:7002/0", want{Mode: rueidis.ClientModeCluster, Addrs: []string{"[::1]:7001", "[::1]:7002"}, User: "u", Password: "p"}},
		{"redis+sentinel://s1:26379,s2:26379/mymaster", want{Mode: rueidis.ClientModeSentinel, Addrs: []string{"s1:26379", "s2:26379"}, MasterSet: "mymaster"}},
		{"redis+sentinel://default:pw@s1:26379/mymaster", want{Mode: rueidis.ClientModeSentinel, Addrs: []string{"s1:26379"}, User: "default", Password: "pw", MasterSet: "mymaster"}},
	}
	for _, tt := range tests {
		opt, mode, err := clientOption(tt.url)
		if err != nil {
			t.Errorf("%s: %v", tt.url, err)
			continue
		}
		got := want{Mode: mode, Addrs: opt.InitAddress, User: opt.Username, Password: opt.Password, MasterSet: opt.Sentinel.MasterSet, DB: opt.SelectDB}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tt.url, d)
		}
		if mode == rueidis.ClientModeSentinel && opt.Sentinel.TopologyRefreshInterval <= 0 {
			t.Errorf("%s: the Sentinel client does not poll the Sentinels", tt.url)
		}
	}
}

func TestClientOptionRefuses(t *testing.T) {
	for _, tt := range []struct{ url, msg string }{
		{"redis+cluster://", "host:port"},
		{"redis+cluster://a:1,,b:2", "host:port"},
		{"redis+cluster://a,b", "host:port"},
		{"redis+cluster://a:0", "host:port"},
		{"redis+cluster://a:70000", "host:port"},
		{"redis+cluster://:pw-Secret@a:1/3", "database 0 only"},
		{"redis+cluster://a:1?dial_timeout=1s", "no query"},
		{"redis+cluster://u:%zz@a:1", "percent-encode"},
		{"redis+sentinel://s:26379", "/<master name>"},
		{"redis+sentinel://s:26379/", "/<master name>"},
		{"redis+sentinel://s:26379/m/1", "/<master name>"},
		{"redis+sentinel://:pw-Secret@s:26379/m?db=1", "no query"},
		{"http://a:1", "invalid URL scheme"},
	} {
		_, _, err := clientOption(tt.url)
		if err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: error %v, want one saying %q", tt.url, err, tt.msg)
		}
		if err != nil && strings.Contains(err.Error(), "Secret") {
			t.Errorf("%s: the error quotes the password: %v", tt.url, err)
		}
	}
}

// TestConfigAgreesWithClient: the config accepts a storage.redis URL
// exactly when NewClient can read it (each parses it itself: the config
// package may not import this one).
func TestConfigAgreesWithClient(t *testing.T) {
	for _, url := range []string{
		"redis://127.0.0.1:6379/0", "rediss://u:p@cache:6380",
		"redis+cluster://a:1", "redis+cluster://a:1,b:2/", "redis+cluster://a:1/0", "redis+cluster://u:p@[::1]:1,[::1]:2",
		"redis+cluster://:s%40@a:1", "redis+cluster://", "redis+cluster://a", "redis+cluster://a:1,", "redis+cluster://a:1/1",
		"redis+cluster://a:1?x=1", "redis+cluster://a:1#f", "redis+cluster://u:%zz@a:1", "redis+cluster://a b:1", "redis+cluster://a:65536",
		"redis+sentinel://s:1/m", "redis+sentinel://u:p@s:1,t:2/m", "redis+sentinel://s:1", "redis+sentinel://s:1/", "redis+sentinel://s:1/m/0",
		"redis+sentinel://s:1/m?db=1", "redis+sentinel:///m", "redis+clusterx://a:1", "http://a:1",
	} {
		_, cerr := config.Parse([]byte("storage: {redis: '"+url+"'}\n"), "t.yaml", &provider.Registry{})
		_, _, perr := clientOption(url)
		if (cerr == nil) != (perr == nil) {
			t.Errorf("%s: config says %v, NewClient says %v", url, cerr, perr)
		}
	}
}

// TestClusterURLNeedsACluster: a redis+cluster:// URL naming a server
// that is not in cluster mode is refused, whether it names one address
// (which rueidis alone would take for a single server) or several.
func TestClusterURLNeedsACluster(t *testing.T) {
	single := strings.TrimSuffix(strings.TrimPrefix(os.Getenv("GATEHOUSE_TEST_REDIS"), "redis://"), "/0")
	if single == "" {
		t.Fatal("GATEHOUSE_TEST_REDIS is not set: run under `make test` or eval \"$(scripts/test-services start)\"")
	}
	for _, url := range []string{"redis+cluster://" + single, "redis+cluster://" + single + "," + single} {
		c, err := NewClient(url)
		if err == nil {
			c.Close()
			t.Fatalf("%s: connected to a server not in cluster mode", url)
		}
		if !errors.Is(err, errNotCluster) {
			t.Errorf("%s: %v, want %v", url, err, errNotCluster)
		}
	}
	c, err := NewClient(redistest.ClusterURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Mode() != rueidis.ClientModeCluster {
		t.Fatalf("a redis+cluster:// client is in %s mode", c.Mode())
	}
}

// TestSentinel: a limiter on a redis+sentinel:// URL, which names only
// the Sentinel, counts on the master it reports, and after a failover on
// the promoted replica, with the counts made before it (the replica had
// them, WAIT says).
func TestSentinel(t *testing.T) {
	s := redistest.StartSentinel(t)
	c, err := NewClient(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if c.Mode() != rueidis.ClientModeSentinel {
		t.Fatalf("a redis+sentinel:// client is in %s mode", c.Mode())
	}
	ctx := context.Background()
	clk := newClock(t0)
	l := newLimiter(t, c, Options{Prefix: "ghtest:", Now: clk.Now, Timeout: 10 * time.Second})
	a := limit.Admission{Tag: "p", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k", RPM: 10}}}
	for i := range 6 {
		if d, err := l.Admit(ctx, a); err != nil || !d.Allowed {
			t.Fatalf("admission %d: %v %+v", i+1, err, d.Refused)
		}
	}
	if n, err := c.Do(ctx, c.B().Wait().Numreplicas(1).Timeout(5000).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("WAIT for the replica: %d %v", n, err)
	}
	if port := serverPort(t, c); !strings.HasSuffix(s.Master, ":"+port) {
		t.Fatalf("the client writes to port %s, not to the master %s", port, s.Master)
	}

	s.Failover(t)
	// The client learns of the switch from the Sentinel (its
	// +switch-master event, or its next poll).
	deadline := time.Now().Add(15 * time.Second)
	for !strings.HasSuffix(s.Replica, ":"+serverPort(t, c)) {
		if time.Now().After(deadline) {
			t.Fatalf("the client still writes to port %s 15s after the failover to %s", serverPort(t, c), s.Replica)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := 6; i < 10; i++ {
		if d, err := l.Admit(ctx, a); err != nil || !d.Allowed {
			t.Fatalf("after the failover, admission %d: %v %+v", i+1, err, d.Refused)
		}
	}
	if d, err := l.Admit(ctx, a); err != nil || d.Allowed {
		t.Fatalf("the 11th admission against rpm=10: %v, allowed %v: the promoted master lacked the counts", err, d.Allowed)
	}
}

// serverPort is the port of the server c sends commands to, or "" when
// it cannot be asked.
func serverPort(t *testing.T, c rueidis.Client) string {
	t.Helper()
	m, err := c.Do(context.Background(), c.B().ConfigGet().Parameter("port").Build()).AsStrMap()
	if err != nil {
		t.Logf("CONFIG GET port: %v", err)
	}
	return m["port"]
}

// TestRedisVersionCheck: a Redis too old for the scripts is refused at
// start with what to do, from its INFO server section; one new enough,
// or one that does not say, is not.
func TestRedisVersionCheck(t *testing.T) {
	for info, refused := range map[string]bool{
		"# Server\r\nredis_version:6.0.16\r\nredis_mode:standalone\r\n": true,
		"# Server\r\nredis_version:5.0.7\r\n":                           true,
		"# Server\r\nredis_version:6.2.0\r\n":                           false,
		"# Server\r\nredis_version:7.0.15\r\n":                          false,
		"# Server\r\nredis_version:10.1.2\r\n":                          false,
		"# Server\r\nredis_mode:standalone\r\n":                         false,
	} {
		err := checkVersion(info)
		if (err != nil) != refused {
			t.Errorf("%q: %v, want refused %v", info, err, refused)
		}
		if err != nil && !strings.Contains(err.Error(), "Redis 6.2 or later") {
			t.Errorf("%q: %v does not say what is needed", info, err)
		}
	}
	// The test server passes: every test's limiter starts.
	c := testClient(t)
	info, err := c.Do(context.Background(), c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkVersion(info); err != nil {
		t.Fatal(err)
	}
}
