package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLimitsAndPricingConfig(t *testing.T) {
	cfg, err := Parse([]byte(`limits: {failure_policy: open, replicas: 3, flush_every: 100ms, headers: refusals}
pricing:
  default_max_output: 1024
  unknown: default
  default: {input: 1, output: 2}
  overrides:
    my-model: {input: 0.5, cached_input: 0.1, output: 1.5}
    other: {input: 3, output: 6}
`), "t.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	want := defaultLimits()
	want.FailurePolicy, want.Replicas, want.FlushEvery, want.Headers = "open", 3, Duration(100e6), "refusals"
	if diff := cmp.Diff(want, cfg.Limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	wantP := Pricing{DefaultMaxOutput: 1024, Unknown: "default", Default: &Price{Input: 1, CachedInput: 1, Output: 2},
		Overrides: map[string]Price{"my-model": {Input: 0.5, CachedInput: 0.1, Output: 1.5}, "other": {Input: 3, CachedInput: 3, Output: 6}}}
	if diff := cmp.Diff(wantP, cfg.Pricing); diff != "" {
		t.Errorf("pricing (-want +got):\n%s", diff)
	}
}

func TestLeaseConfig(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       Lease
	}{
		{"defaults, off", "storage: {redis: redis://r:6379, postgres: postgres://p/db}\n",
			Lease{Fraction: DefaultLeaseFraction, Idle: DefaultLeaseIdle}},
		{"on, defaults", "storage: {redis: redis://r:6379, postgres: postgres://p/db}\nlimits: {lease: {enabled: true}}\n",
			Lease{Enabled: true, Fraction: 0.05, Idle: Duration(10e9)}},
		{"on, set", "storage: {redis: redis://r:6379, postgres: postgres://p/db}\nlimits: {lease: {enabled: true, fraction: 0.02, idle: 1m}}\n",
			Lease{Enabled: true, Fraction: 0.02, Idle: Duration(60e9)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "t.yaml", testTypes())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, cfg.Limits.Lease); diff != "" {
				t.Errorf("lease (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLimitsValidation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []problem
	}{
		{"policy", "limits: {failure_policy: maybe}\n", []problem{{1, 26, "limits.failure_policy", `unknown failure policy "maybe"; want one of closed, open`}}},
		{"header mode", "limits: {headers: none}\n", []problem{{1, 19, "limits.headers", `unknown rate-limit header mode "none"; want one of all, refusals`}}},
		{"flush bound", "limits: {flush_every: 5s}\n", []problem{{1, 23, "limits.flush_every", "at most 1s"}}},
		{"replicas", "limits: {replicas: -2}\n", []problem{{1, 20, "limits.replicas", "0 or more"}}},
		{"reservation ttl below the longest request", "timeouts: {total: 20m}\nlimits: {reservation_ttl: 15m}\n",
			[]problem{{2, 27, "limits.reservation_ttl", "longer than the longest model total timeout (20m0s)"}}},
		{"lease fraction too large", "limits: {lease: {fraction: 0.6}}\n",
			[]problem{{1, 28, "limits.lease.fraction", "above 0 and at most 0.5"}}},
		{"lease fraction negative", "limits: {lease: {fraction: -0.1}}\n",
			[]problem{{1, 28, "limits.lease.fraction", "above 0 and at most 0.5"}}},
		{"lease idle negative", "limits: {lease: {idle: -1s}}\n",
			[]problem{{1, 24, "limits.lease.idle", "above 0 and at most 1h0m0s"}}},
		{"lease idle too long", "limits: {lease: {idle: 2h}}\n",
			[]problem{{1, 24, "limits.lease.idle", "above 0 and at most 1h0m0s"}}},
		{"lease in embedded mode", "limits: {lease: {enabled: true}}\n",
			[]problem{{1, 27, "limits.lease.enabled", "cluster mode only"}}},
		{"lease not a map", "limits: {lease: yes}\n", []problem{{1, 17, "limits.lease", "expected a mapping"}}},
		{"lease unknown field", "limits: {lease: {size: 3}}\n", []problem{{1, 18, "limits.lease.size", ""}}},
		{"default price required", "pricing: {unknown: default}\n", []problem{{1, 10, "pricing.default", "required when pricing.unknown is default"}}},
		{"negative price", "pricing:\n  overrides:\n    m: {input: -1, output: 2}\n", []problem{{3, 16, "pricing.overrides.m.input", "must not be negative"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "t.yaml", testTypes())
			checkProblems(t, err, tt.want)
		})
	}
}
