package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// TestMemoizedKeysRotatedAndReloaded: the request path memoizes a key's
// hash after its first use (auth.HashMemo), and that never keeps a key
// working past its end: a virtual key used twice and then rotated is
// refused while its new secret works, and a config key used twice and
// then removed by a reload is refused.
func TestMemoizedKeysRotatedAndReloaded(t *testing.T) {
	const dropped = "gh-memo-static-dropped"
	up := startUpstream(t, mockllm.Options{})
	cfg := baseConfig(up, "admin_key: "+testAdminKey+"\n")
	withDropped := strings.Replace(cfg, "keys:\n", "keys:\n  - {key: "+dropped+", project: qa}\n", 1)
	gw := startGateway(t, withDropped)

	out, stderr, err := cliRun(t, gw.URL, "keys", "create", "--project", "qa", "--name", "memo", "--json")
	if err != nil {
		t.Fatalf("keys create: %v\n%s", err, stderr)
	}
	var created struct{ ID, Key string }
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Key == "" {
		t.Fatalf("keys create --json: %v\n%s", err, out)
	}
	for _, key := range []string{created.Key, created.Key, dropped, dropped} {
		if st := chatStatus(t, gw.URL, key); st != http.StatusOK {
			t.Fatalf("before the changes: status %d", st)
		}
	}

	out, stderr, err = cliRun(t, gw.URL, "keys", "rotate", created.ID, "--json")
	if err != nil {
		t.Fatalf("keys rotate: %v\n%s", err, stderr)
	}
	var rotated struct{ Key string }
	if err := json.Unmarshal([]byte(out), &rotated); err != nil || rotated.Key == "" || rotated.Key == created.Key {
		t.Fatalf("keys rotate --json: %v\n%s", err, out)
	}
	waitRefused(t, gw.URL, created.Key)
	if st := chatStatus(t, gw.URL, rotated.Key); st != http.StatusOK {
		t.Fatalf("rotated secret: status %d", st)
	}

	replaceFile(t, gw.Path, cfg)
	waitFor(t, 30*time.Second, "the reload", func() bool { return strings.Contains(gw.Logs.String(), "config reloaded") })
	if st := chatStatus(t, gw.URL, dropped); st != http.StatusUnauthorized {
		t.Fatalf("config key removed by the reload: status %d, want 401", st)
	}
	if st := chatStatus(t, gw.URL, clientKey); st != http.StatusOK {
		t.Fatalf("config key kept by the reload: status %d", st)
	}
}
