package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestAdminKeysValidation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []problem
	}{
		{"name required", "admin_keys:\n  - {key: a, role: viewer}\n", []problem{{2, 5, "admin_keys[0].name", "is required"}}},
		{"key required", "admin_keys:\n  - {name: v, role: viewer}\n", []problem{{2, 5, "admin_keys[0].key", "is required"}}},
		{"role required", "admin_keys:\n  - {name: v, key: a}\n", []problem{{2, 5, "admin_keys[0].role", "is required; want one of admin, viewer"}}},
		{"unknown role", "admin_keys:\n  - {name: v, key: a, role: owner}\n", []problem{{2, 29, "admin_keys[0].role", `unknown role "owner"`}}},
		{"duplicate name", "admin_keys:\n  - {name: v, key: a, role: viewer}\n  - {name: v, key: b, role: admin}\n",
			[]problem{{3, 12, "admin_keys[1].name", `duplicate admin key name "v"`}}},
		{"name of admin_key", "admin_key: x\nadmin_keys:\n  - {name: admin, key: a, role: viewer}\n",
			[]problem{{3, 12, "admin_keys[0].name", `"admin" is the name of admin_key`}}},
		{"same secret as admin_key", "admin_key: x\nadmin_keys:\n  - {name: v, key: x, role: viewer}\n",
			[]problem{{3, 20, "admin_keys[0].key", "duplicate key: the same value as admin_key"}}},
		{"same secret as a client key", "keys:\n  - {key: c}\nadmin_keys:\n  - {name: v, key: c, role: viewer}\n",
			[]problem{{4, 20, "admin_keys[0].key", "is also a client key"}}},
		{"admin_key is a client key", "admin_key: c\nkeys:\n  - {key: c}\n",
			[]problem{{1, 12, "admin_key", "is also a client key"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "t.yaml", testTypes())
			checkProblems(t, err, tt.want)
		})
	}
}

func TestAllAdminKeys(t *testing.T) {
	cfg, err := Parse([]byte("admin_key: root\nadmin_keys:\n  - {name: ops, key: o, role: admin}\n  - {name: dash, key: d, role: viewer}\n"), "t.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(cfg.AllAdminKeys()[0].Name, cfg.AllAdminKeys()[0].Role, len(cfg.AllAdminKeys()))
	if got != "adminadmin3" || !cfg.HasAdmin() {
		t.Errorf("AllAdminKeys = %+v, HasAdmin %t", cfg.AllAdminKeys(), cfg.HasAdmin())
	}
	if k := cfg.AllAdminKeys()[2]; k.Name != "dash" || k.Key != "d" || k.Role != RoleViewer {
		t.Errorf("third admin key = %#v", k)
	}
	none, err := Parse([]byte("listen: ':1'\n"), "t.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	if none.HasAdmin() || len(none.AllAdminKeys()) != 0 {
		t.Errorf("no admin key configured, yet HasAdmin %t, %d keys", none.HasAdmin(), len(none.AllAdminKeys()))
	}
}

func TestAdminKeysRedacted(t *testing.T) {
	t.Setenv("GH_T_VIEWER", "viewer-Secret-0009")
	cfg, err := Parse([]byte("admin_keys:\n  - {name: dash, key: '${GH_T_VIEWER}', role: viewer}\n"), "t.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("cfg", "config", cfg, "admin", cfg.AdminKeys[0])
	for what, s := range map[string]string{
		"%+v Config": fmt.Sprintf("%+v", cfg),
		"%#v key":    fmt.Sprintf("%#v", cfg.AdminKeys[0]),
		"%v keys":    fmt.Sprint(cfg.AdminKeys),
		"Redacted":   fmt.Sprintf("%+v", cfg.Redacted().AdminKeys),
		"slog":       logs.String(),
	} {
		assertNoSecret(t, what, s)
		if !strings.Contains(s, "dash") {
			t.Errorf("%s lost the name: %s", what, s)
		}
	}
	if cfg.AdminKeys[0].Key != "viewer-Secret-0009" {
		t.Errorf("redaction changed the config's key to %q", cfg.AdminKeys[0].Key)
	}
	_, err = Parse([]byte("admin_keys:\n  - {name: a, key: '${GH_T_VIEWER}', role: viewer}\n  - {name: b, key: '${GH_T_VIEWER}', role: admin}\n"), "t.yaml", testTypes())
	if err == nil {
		t.Fatal("duplicate admin keys accepted")
	}
	assertNoSecret(t, "duplicate key error", err.Error())
}
