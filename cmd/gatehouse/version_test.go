package main

import (
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolveVersion(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name            string
		version, commit string // the -X values
		info            *debug.BuildInfo
		want            buildVersion
	}{
		{"stamped wins over build info", "v1.2.0", "feedface",
			&debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v9.9.9"}, Settings: vcs(rev, "true")},
			buildVersion{Version: "v1.2.0", Commit: "feedface", Go: "go1.26.1"}},
		{"go install of a tag", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.3.0"}},
			buildVersion{Version: "v1.3.0", Commit: "unknown", Go: "go1.26.1"}},
		{"go build in a clean checkout", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.0.0-20260101120000-0123456789ab"}, Settings: vcs(rev, "false")},
			buildVersion{Version: "v0.0.0-20260101120000-0123456789ab", Commit: rev, Go: "go1.26.1"}},
		{"go build in a modified checkout", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")},
			buildVersion{Version: "dev", Commit: rev + "-dirty", Go: "go1.26.1"}},
		{"no VCS information", "", "",
			&debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}},
			buildVersion{Version: "dev", Commit: "unknown", Go: "go1.26.1"}},
		{"only the version stamped", "v1.2.0", "",
			&debug.BuildInfo{GoVersion: "go1.26.1", Settings: vcs(rev, "false")},
			buildVersion{Version: "v1.2.0", Commit: rev, Go: "go1.26.1"}},
		{"no build info at all", "", "", nil,
			buildVersion{Version: "dev", Commit: "unknown", Go: runtime.Version()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, resolveVersion(tt.version, tt.commit, tt.info)); diff != "" {
				t.Errorf("resolveVersion (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionString(t *testing.T) {
	got := buildVersion{Version: "v1.2.0", Commit: "abc", Go: "go1.26.1"}.String()
	want := "gatehouse v1.2.0 (commit abc, go1.26.1 " + runtime.GOOS + "/" + runtime.GOARCH + ")"
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestProcessVersion runs the built command: the flag and the subcommand
// print the same line, and the binary's own build information is what it
// reports (this build is not stamped).
func TestProcessVersion(t *testing.T) {
	bin := gatehouseBinary(t)
	run := func(arg string) string {
		out, err := exec.Command(bin, arg).CombinedOutput()
		if err != nil {
			t.Fatalf("gatehouse %s: %v\n%s", arg, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	flag, sub := run("--version"), run("version")
	if flag != sub {
		t.Errorf("gatehouse --version printed %q, gatehouse version %q", flag, sub)
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	want := "gatehouse dev (commit unknown, "
	if rev := buildSetting(string(info), "vcs.revision"); rev != "" {
		want = "(commit " + rev
	}
	if !strings.HasPrefix(flag, "gatehouse ") || !strings.Contains(flag, want) {
		t.Errorf("gatehouse --version = %q, want it to contain %q", flag, want)
	}
}

// buildSetting finds a "build KEY=VALUE" line of go version -m's output.
func buildSetting(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "build\t"+key+"="); ok {
			return v
		}
	}
	return ""
}
