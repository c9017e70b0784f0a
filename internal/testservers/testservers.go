// Package testservers starts private PostgreSQL and Redis servers for the
// tests that stop, crash and restart them to prove what gatehouse does
// while one is away. The shared servers of scripts/test-services must not
// be stopped under other packages' tests, so each such test gets servers
// of its own, on free loopback ports, with their data in a temporary
// directory, stopped and removed when the test ends.
//
// It is used only from tests, and never skips: a missing server binary
// fails the test with the command that installs it.
package testservers

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// install says how to get a missing Debian package, the distribution
// scripts/test-services installs from.
func install(pkg string) string {
	if os.Geteuid() == 0 {
		return "apt-get install -y " + pkg
	}
	return "sudo apt-get install -y " + pkg
}

// freePort returns a loopback port nobody listens on, below the kernel's
// ephemeral range: a server restarted on its port must find it free, and
// a port inside that range can meanwhile be taken as the local port of
// some outgoing connection (scripts/test-services explains).
func freePort(t testing.TB) int {
	t.Helper()
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 12000 {
				lo = v
			}
		}
	}
	for range 200 {
		port := lo - 10000 + rand.IntN(10000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		ln.Close()
		return port
	}
	t.Fatalf("no free loopback port found in %d-%d", lo-10000, lo-1)
	return 0
}

// tempDir makes a directory for a server's data, removed when the test
// ends. As root it is under /tmp and readable by all, since PostgreSQL
// runs as the postgres user and must reach its data directory (a
// TMPDIR under /root would not let it).
func tempDir(t testing.TB, prefix string) string {
	t.Helper()
	base := os.TempDir()
	if os.Geteuid() == 0 {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tail is the last lines of a server's log file, for a failure message.
func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// waitFor polls ready every 20 ms until it returns nil or d passes, and
// returns its last error then.
func waitFor(d time.Duration, ready func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lookPath finds a binary on PATH or in dirs, in that order.
func lookPath(name string, dirs ...string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New(name + " not found on PATH")
}
