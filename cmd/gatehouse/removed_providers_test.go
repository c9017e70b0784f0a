package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/auth"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/store/sqlite"
)

// TestWarnRemovedProviders: after a reload that removed providers, the
// log counts the active stored keys and the projects still allowed one
// of them, names the providers and no key, and says nothing when none
// is named.
func TestWarnRemovedProviders(t *testing.T) {
	if got := removedProviders(map[string]bool{"a": true, "gone": true, "old": true}, map[string]bool{"a": true, "new": true}); !cmp.Equal(got, []string{"gone", "old"}) {
		t.Fatalf("removed %v, want [gone old]", got)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "g.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	proj := &auth.Project{Name: "p1", Providers: []string{"kept", "gone"}}
	if err := st.CreateProject(ctx, proj); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateProject(ctx, &auth.Project{Name: "p2", Providers: []string{"kept"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	past := now.Add(-time.Hour)
	for i, k := range []auth.Key{
		{Name: "counted", Providers: []string{"gone"}},
		{Name: "counted too", Providers: []string{"kept", "old"}},
		{Name: "other", Providers: []string{"kept"}},
		{Name: "all"},
		{Name: "revoked", Providers: []string{"gone"}},
		{Name: "expired", Providers: []string{"gone"}, ExpiresAt: &past},
	} {
		k.ProjectID, k.Prefix = proj.ID, "gh-sec"+string(rune('a'+i))
		k.Hash = sha256.Sum256([]byte(k.Name))
		if err := st.CreateKey(ctx, &k); err != nil {
			t.Fatal(err)
		}
		if k.Name == "revoked" {
			if err := st.RevokeKey(ctx, k.ID, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	warnRemovedProviders(ctx, st, []string{"gone", "old"}, now, log)
	out := logs.String()
	if !strings.Contains(out, "keys=2 projects=1") || !strings.Contains(out, "providers=\"[gone old]\"") {
		t.Fatalf("log %q: want 2 keys and 1 project counted, the providers named", out)
	}
	if strings.Contains(out, "gh-sec") || strings.Contains(out, "counted") {
		t.Errorf("the warning names a key: %q", out)
	}
	logs.Reset()
	warnRemovedProviders(ctx, st, []string{"never-allowed"}, now, log)
	if logs.Len() != 0 {
		t.Errorf("a removed provider nothing names: %q", logs.String())
	}
}

// TestReloadWarnsOfRemovedProviders: a reload that removes a provider a
// stored key is allowed logs the warning, through the real reload.
func TestReloadWarnsOfRemovedProviders(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	second := "  - {name: second, type: openai-compatible, base_url: " + up.URL + "/v1, api_key: " + upstreamKey + "}\n"
	base := baseConfig(up, "admin_key: "+testAdminKey+"\n")
	withSecond := strings.Replace(base, "keys:\n", second+"keys:\n", 1)
	gw := startGateway(t, withSecond)
	mustCall(t, 201, "POST", gw.URL+"/admin/projects", testAdminKey, `{"name":"shop"}`)
	created := mustCall(t, 201, "POST", gw.URL+"/admin/keys", testAdminKey, `{"project":"shop","name":"ci","providers":["second"]}`)
	replaceFile(t, gw.Path, base)
	// The warning follows the "config reloaded" line.
	waitFor(t, 30*time.Second, "the warning", func() bool {
		return strings.Contains(gw.Logs.String(), "still allowed to stored keys or projects")
	})
	logs := gw.Logs.String()
	if !strings.Contains(logs, `"providers":["second"],"keys":1,"projects":0`) {
		t.Fatalf("the warning does not count the one key:\n%s", logs)
	}
	var key struct{ Key string }
	if err := json.Unmarshal(created.body, &key); err != nil || key.Key == "" || strings.Contains(logs, key.Key) {
		t.Fatalf("the key's secret is missing from its creation (%v) or is in the log", err)
	}
}
