package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitFile is a systemd unit: section → key → values (a key may repeat).
type unitFile map[string]map[string][]string

// parseUnit reads the unit syntax the file uses: [Section] headers,
// Key=Value lines, # and ; comments. Continuation lines are refused:
// the file does not use them and this parser would misread them.
func parseUnit(text string) (unitFile, error) {
	u := unitFile{}
	section := ""
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case strings.HasSuffix(line, `\`):
			return nil, &unitError{i + 1, "continuation lines are not understood here"}
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		case section == "":
			return nil, &unitError{i + 1, "a key before the first section"}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return nil, &unitError{i + 1, "want Key=Value"}
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u, nil
}

type unitError struct {
	line int
	msg  string
}

func (e *unitError) Error() string { return "line " + strconv.Itoa(e.line) + ": " + e.msg }

// get is the last value of a key, as systemd takes it for single-valued
// settings.
func (u unitFile) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// systemdSeconds reads the time spans the unit uses: "45s", "45", "2min".
func systemdSeconds(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(strings.Replace(v, "min", "m", 1))
}

// TestSystemdUnit checks the unit's promises (hardened, a state directory
// holding the SQLite file, a stop timeout above the shutdown grace, many
// file descriptors) and its config's validity; systemd-analyze verify,
// present on this machine or not, has the last word on the syntax.
func TestSystemdUnit(t *testing.T) {
	const dir = "deploy/systemd"
	text := readFile(t, dir+"/gatehouse.service")
	u, err := parseUnit(text)
	if err != nil {
		t.Fatalf("gatehouse.service: %v", err)
	}
	want := map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "Restart": "on-failure", "KillSignal": "SIGTERM",
		"StateDirectory": "gatehouse", "PrivateTmp": "yes", "ProtectHome": "yes",
	}
	for k, v := range want {
		if got := u.get("Service", k); got != v {
			t.Errorf("[Service] %s=%q, want %q", k, got, v)
		}
	}
	if u.get("Service", "DynamicUser") != "yes" && (u.get("Service", "User") == "" || u.get("Service", "User") == "root") {
		t.Error("the service runs as root: want DynamicUser=yes or a User of its own")
	}
	if n, err := strconv.Atoi(u.get("Service", "LimitNOFILE")); err != nil || n < 65536 {
		t.Errorf("LimitNOFILE=%s: want at least 65536 (each stream holds two descriptors)", u.get("Service", "LimitNOFILE"))
	}

	exec0 := strings.Fields(u.get("Service", "ExecStart"))
	if len(exec0) != 4 || exec0[1] != "serve" || exec0[2] != "--config" {
		t.Fatalf("ExecStart=%s: want BINARY serve --config FILE", u.get("Service", "ExecStart"))
	}
	cfgDir := "/etc/" + u.get("Service", "ConfigurationDirectory") + "/"
	if !strings.HasPrefix(exec0[3], cfgDir) {
		t.Errorf("the config %s is not in the ConfigurationDirectory %s", exec0[3], cfgDir)
	}
	if !strings.Contains(readFile(t, dir+"/README.md"), filepath.Base(exec0[3])+" "+exec0[3]) {
		t.Errorf("README.md does not install %s where ExecStart reads it (%s)", filepath.Base(exec0[3]), exec0[3])
	}
	cfg := checkConfig(t, filepath.Join(root, dir, filepath.Base(exec0[3])), map[string]string{"GATEHOUSE_ADMIN_KEY": "a", "OPENAI_API_KEY": "b"})
	if state := "/var/lib/" + u.get("Service", "StateDirectory") + "/"; !strings.HasPrefix(cfg.Storage.SQLite, state) {
		t.Errorf("the SQLite file %s is outside the StateDirectory %s, the only place the service may write", cfg.Storage.SQLite, state)
	}
	stop, err := systemdSeconds(u.get("Service", "TimeoutStopSec"))
	if err != nil || stop <= cfg.Server.ShutdownGrace.D() {
		t.Errorf("TimeoutStopSec=%s is not above server.shutdown_grace %v: systemd would kill streams still draining",
			u.get("Service", "TimeoutStopSec"), cfg.Server.ShutdownGrace.D())
	}

	// systemd-analyze verify checks every key and that ExecStart's binary
	// exists: point it at the binary the image builds. It exits 0 on a
	// misspelt key or value, only saying so: any output is a failure.
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Log("systemd-analyze is not installed: checked the unit's keys only")
		return
	}
	unit := filepath.Join(t.TempDir(), "gatehouse.service")
	if err := os.WriteFile(unit, []byte(strings.Replace(text, "ExecStart="+exec0[0], "ExecStart="+imageBinary(t), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command("systemd-analyze", "verify", "--man=no", unit)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || out.Len() > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out.String())
	}
}

func TestParseUnit(t *testing.T) {
	u, err := parseUnit("# c\n[Service]\nA=1\n; c\nA = 2\nB=x=y\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := u["Service"]["A"]; len(got) != 2 || u.get("Service", "A") != "2" || u.get("Service", "B") != "x=y" {
		t.Errorf("parsed %v", u)
	}
	for _, bad := range []string{"A=1\n", "[S]\nnokey\n", "[S]\nA=1 \\\n 2\n"} {
		if _, err := parseUnit(bad); err == nil {
			t.Errorf("parseUnit(%q): no error", bad)
		}
	}
}
