package config

import (
	"strings"
	"testing"
)

func fakeEnv(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestExpand(t *testing.T) {
	env := fakeEnv(map[string]string{"X": "1", "EMPTY": "", "URL": "http://h:1"})
	tests := []struct {
		name, in, want string
		wantErr        string // part of the only error, if any
	}{
		{"plain", "a: ${X}\n", "a: 1\n", ""},
		{"twice on a line", "a: ${X}-${X}\n", "a: 1-1\n", ""},
		{"default when unset", "a: ${NOPE:-d}\n", "a: d\n", ""},
		{"default when empty", "a: ${EMPTY:-d}\n", "a: d\n", ""},
		{"default ignored when set", "a: ${X:-d}\n", "a: 1\n", ""},
		{"default with punctuation", "a: ${NOPE:-http://h:2/v1}\n", "a: http://h:2/v1\n", ""},
		{"empty default", "a: ${NOPE:-}\n", "a: \n", ""},
		{"set but empty", "a: ${EMPTY}\n", "a: \n", ""},
		{"in double quotes", "a: \"${URL}\"\n", "a: \"http://h:1\"\n", ""},
		{"dollar escape", "a: $$5 and $${X}\n", "a: $5 and ${X}\n", ""},
		{"lone dollar kept", "a: $5 $X $\n", "a: $5 $X $\n", ""},
		{"full-line comment skipped", "# a: ${NOPE}\na: ${X}\n", "# a: ${NOPE}\na: 1\n", ""},
		{"indented comment skipped", "  # ${NOPE}\n", "  # ${NOPE}\n", ""},
		{"trailing comment skipped", "a: b # ${NOPE}\n", "a: b # ${NOPE}\n", ""},
		{"hash inside quotes is not a comment", "a: \"b # ${X}\"\n", "a: \"b # 1\"\n", ""},
		{"hash inside single quotes", "a: 'b # ${X}'\n", "a: 'b # 1'\n", ""},
		{"apostrophe in a plain scalar", "a: it's # ${NOPE}\n", "a: it's # ${NOPE}\n", ""},
		{"hash without a space", "a: b#${X}\n", "a: b#1\n", ""},
		{"unset", "a: ${NOPE}\n", "a: \n", "environment variable NOPE is not set"},
		{"bad name", "a: ${1X}\n", "a: \n", "invalid reference ${1X}"},
		{"other operator", "a: ${X:?err}\n", "a: \n", "invalid reference ${X:?err}"},
		{"unterminated", "a: ${X\nb: c\n", "a: ${X\nb: c\n", "unterminated ${"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, errs, _ := expand([]byte(tt.in), env)
			if string(out) != tt.want {
				t.Errorf("expand(%q) = %q, want %q", tt.in, out, tt.want)
			}
			switch {
			case tt.wantErr == "" && len(errs) > 0:
				t.Errorf("unexpected errors %v", errs)
			case tt.wantErr != "" && (len(errs) != 1 || !strings.Contains(errs[0].msg, tt.wantErr)):
				t.Errorf("errors %v, want one with %q", errs, tt.wantErr)
			}
		})
	}
}

func TestEnvErrorNamesVariableAndLine(t *testing.T) {
	src := `listen: 127.0.0.1:8080
providers:
  - name: openai
    type: openai
    api_key: ${GH_TEST_UNSET_KEY}
  - name: other
    type: anthropic
    api_key: "${GH_TEST_UNSET_TOO}"
    base_url: ${GH_TEST_UNSET_URL:-not a url}
`
	_, err := Parse([]byte(src), "t.yaml", testTypes())
	checkProblems(t, err, []problem{
		{5, 14, "providers[0].api_key", "environment variable GH_TEST_UNSET_KEY is not set (use ${GH_TEST_UNSET_KEY:-} to allow it to be empty)"},
		{8, 15, "providers[1].api_key", "environment variable GH_TEST_UNSET_TOO is not set"},
		{9, 15, "providers[1].base_url", "absolute http:// or https:// URL"},
	})
}

// Substituted values of any length, even with line breaks, leave every
// later position where it is in the file.
func TestEnvKeepsPositions(t *testing.T) {
	t.Setenv("GH_TEST_LONG", strings.Repeat("k", 100))
	t.Setenv("GH_TEST_MULTI", "line one\n\n  line three")
	t.Setenv("GH_TEST_HOST", "a-rather-long-host-name.example")
	t.Setenv("GH_TEST_TYPE", "bogus")
	t.Setenv("GH_TEST_SHORT", "1s")
	src := `admin_key: ${GH_TEST_LONG}
storage:
  sqlite: "${GH_TEST_MULTI}"
listen: ${GH_TEST_HOST}
timeouts: {connect: ${GH_TEST_SHORT}, idle: ${GH_TEST_HOST}}
providers:
  - name: a
    type: ${GH_TEST_TYPE}
    base_url: http://${GH_TEST_HOST}/v1
    strange: ${GH_TEST_LONG}
`
	_, err := Parse([]byte(src), "t.yaml", testTypes())
	checkProblems(t, err, []problem{
		{4, 9, "listen", "must be host:port"},
		{5, 45, "timeouts.idle", `invalid duration "a-rather-long-host-name.example"`},
		{8, 11, "providers[0].type", `unknown provider type "bogus"`},
		{10, 5, "providers[0].strange", `unknown field "strange"`},
	})
}

func TestEnvTypedValues(t *testing.T) {
	t.Setenv("GH_TEST_RPM", "42")
	t.Setenv("GH_TEST_ON", "true")
	cfg, err := Parse([]byte("keys:\n  - {key: k, rpm: ${GH_TEST_RPM}, tpm: ${GH_TEST_TPM:-7}}\ncache:\n  exact: {enabled: ${GH_TEST_ON}}\n"), "t.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	if k := cfg.Keys[0]; k.RPM != 42 || k.TPM != 7 || !cfg.Cache.Exact.Enabled {
		t.Errorf("got %+v, cache %+v", k, cfg.Cache.Exact)
	}
}

func TestPosMapIdentityWithoutSubstitution(t *testing.T) {
	src := []byte("a: b\n")
	out, pm, errs, _ := expand(src, fakeEnv(nil))
	if pm != nil || len(errs) != 0 || string(out) != string(src) {
		t.Fatalf("expand without references = %q, %v, %v", out, pm, errs)
	}
	if l, c := pm.source(3, 7); l != 3 || c != 7 {
		t.Errorf("nil map moved 3:7 to %d:%d", l, c)
	}
}
