package main

import (
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/google/go-cmp/cmp"
)

// TestParseExpiryKeepsFractions: --expires writes the instant to the
// nanosecond, for an RFC 3339 time and a lifetime alike.
func TestParseExpiryKeepsFractions(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600))
	for _, c := range []struct{ in, want string }{
		{"2030-01-02T03:04:05.25Z", "2030-01-02T03:04:05.25Z"},
		{"2030-01-02T04:04:05.000000001+01:00", "2030-01-02T03:04:05.000000001Z"},
		{"2030-01-02T03:04:05Z", "2030-01-02T03:04:05Z"},
		{"90m", "2026-01-02T03:34:05.123456789Z"},
		{"1.5s", "2026-01-02T02:04:06.623456789Z"},
		{"2d", "2026-01-04T02:04:05.123456789Z"},
	} {
		got, err := parseExpiry(c.in, now)
		if err != nil || got != c.want {
			t.Errorf("--expires %s: %q %v, want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "0d", "-1h", "tomorrow", "2030-01-02"} {
		if got, err := parseExpiry(bad, now); err == nil {
			t.Errorf("--expires %q accepted as %q", bad, got)
		}
	}
}

// TestProvidersFlag: --providers on keys and projects, parsed as the
// command line gives it: a comma-separated list replaces the allowed
// providers, an empty value clears them (the API's null), and leaving
// the flag out sends nothing, so an update keeps them.
func TestProvidersFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want any // the body's "providers"; absent when missing
		sent bool
	}{
		{[]string{"--providers", "openai,local-ollama"}, []string{"openai", "local-ollama"}, true},
		{[]string{"--providers", "openai", "--providers", "azure"}, []string{"openai", "azure"}, true},
		{[]string{"--providers", ""}, nil, true},
		{[]string{"--rpm", "5"}, nil, false},
	} {
		for _, cmd := range [][]string{{"keys", "update", "key_1"}, {"projects", "update", "proj_1"}} {
			var cl cli
			p, err := kong.New(&cl, kong.Vars{"version": "test"})
			if err != nil {
				t.Fatal(err)
			}
			args := append(append([]string(nil), cmd...), c.args...)
			if _, err := p.Parse(args); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			var body settings
			if cmd[0] == "keys" {
				body, err = cl.Keys.Update.body(settings{}, cl.Keys.Update.Models != nil)
			} else {
				body, err = cl.Projects.Update.body(settings{}, cl.Projects.Update.Models != nil)
			}
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			got, sent := body["providers"]
			if sent != c.sent || !cmp.Equal(got, c.want) {
				t.Errorf("%v: providers %#v (sent %v), want %#v (sent %v)", args, got, sent, c.want, c.sent)
			}
		}
	}
}
