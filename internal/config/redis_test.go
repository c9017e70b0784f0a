package config

import "testing"

// TestRedisSeedList: storage.redis given as a list of host:port, in
// block or flow style, is the redis+cluster:// URL of those nodes, and
// selects cluster mode like any URL.
func TestRedisSeedList(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"storage:\n  postgres: postgres://p/db\n  redis:\n    - 10.0.0.1:7000\n    - '[::1]:7001'\n    - node-3.internal:6379\n",
			"redis+cluster://10.0.0.1:7000,[::1]:7001,node-3.internal:6379"},
		{"storage: {postgres: postgres://p/db, redis: [a:7000, b:7001]}\n", "redis+cluster://a:7000,b:7001"},
		{"x-seeds: &seeds [a:1]\nstorage: {postgres: postgres://p/db, redis: *seeds}\n", "redis+cluster://a:1"},
		{"storage: {postgres: postgres://p/db, redis: 'redis+sentinel://s:26379/m'}\n", "redis+sentinel://s:26379/m"},
	}
	for _, tt := range tests {
		cfg, err := Parse([]byte(tt.yaml), "t.yaml", testTypes())
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.yaml, err)
			continue
		}
		if cfg.Storage.Redis != tt.want || !cfg.Cluster() {
			t.Errorf("Parse(%q): storage.redis %q (cluster mode %v), want %q", tt.yaml, cfg.Storage.Redis, cfg.Cluster(), tt.want)
		}
	}
}
