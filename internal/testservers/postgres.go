package testservers

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// Postgres is a PostgreSQL server of one test: its own data directory
// and port, managed with pg_ctl. Its methods may be called from any
// goroutine.
type Postgres struct {
	bin, data string
	port      int

	mu      sync.Mutex
	running bool
}

// pgBinDirs are where PostgreSQL 14-18 keep their server binaries
// (Debian and Ubuntu, then PGDG's packages), newest first.
func pgBinDirs() []string {
	var dirs []string
	for v := 18; v >= 14; v-- {
		dirs = append(dirs, fmt.Sprintf("/usr/lib/postgresql/%d/bin", v), fmt.Sprintf("/usr/pgsql-%d/bin", v))
	}
	return dirs
}

// findPgBin is GATEHOUSE_TEST_PGBIN, or the first directory holding
// initdb, pg_ctl and postgres.
func findPgBin() (string, error) {
	dirs := pgBinDirs()
	if d := os.Getenv("GATEHOUSE_TEST_PGBIN"); d != "" {
		dirs = []string{d}
	}
	for _, d := range dirs {
		ok := true
		for _, tool := range []string{"initdb", "pg_ctl", "postgres"} {
			if _, err := os.Stat(filepath.Join(d, tool)); err != nil {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server (initdb, pg_ctl, postgres) in %v", dirs)
}

// StartPostgres makes a new database cluster (initdb, trust
// authentication, user postgres) and starts it on a free loopback port.
// It is stopped and removed when the test ends. As root, PostgreSQL's
// tools run as the postgres user (PostgreSQL refuses root), through
// runuser. A missing PostgreSQL fails the test.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin, err := findPgBin()
	if err != nil {
		t.Fatalf("PostgreSQL is missing (%v): install it with `%s`, or set GATEHOUSE_TEST_PGBIN to its bin directory", err, install("postgresql"))
	}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("runuser"); err != nil {
			t.Fatalf("runuser is missing (%v), needed to run PostgreSQL as the postgres user: install it with `%s`", err, install("util-linux"))
		}
		if err := exec.Command("id", "postgres").Run(); err != nil {
			t.Fatalf("there is no postgres user to run PostgreSQL as: add it with `useradd --system --user-group --no-create-home postgres`")
		}
	}
	p := &Postgres{bin: bin, data: filepath.Join(tempDir(t, "gatehouse-pg-"), "data"), port: freePort(t)}
	if err := p.mkdir(); err != nil {
		t.Fatal(err)
	}
	if out, err := p.tool("initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	// Stopped before the directory is removed (cleanups run last first).
	t.Cleanup(func() { _ = p.Kill() })
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// mkdir makes the data directory, owned by whoever runs the server.
func (p *Postgres) mkdir() error {
	if os.Geteuid() != 0 {
		return os.Mkdir(p.data, 0o700)
	}
	if out, err := exec.Command("install", "-d", "-o", "postgres", "-g", "postgres", "-m", "700", p.data).CombinedOutput(); err != nil {
		return fmt.Errorf("install -d %s: %v: %s", p.data, err, out)
	}
	return nil
}

// tool is a command running one of PostgreSQL's programs.
func (p *Postgres) tool(name string, args ...string) *exec.Cmd {
	path := filepath.Join(p.bin, name)
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

// Port is the port the server listens on, stopped or not.
func (p *Postgres) Port() int { return p.port }

// DSN is the URL of database postgres as user postgres.
func (p *Postgres) DSN() string { return p.DSNOf("postgres") }

// DSNOf is the URL of database db.
func (p *Postgres) DSNOf(db string) string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(p.port) + "/" + db + "?sslmode=disable"
}

// Start starts the server on its port and returns once it accepts
// connections. Durability is off (fsync, as the test services run it):
// Kill is a crash of the server process, not of the machine.
func (p *Postgres) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running {
		return errors.New("postgres: already running")
	}
	log := filepath.Join(p.data, "server.log")
	out, err := p.tool("pg_ctl", "-D", p.data, "-l", log, "-w", "-t", "60",
		"-o", "-p "+strconv.Itoa(p.port)+" -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off -c max_connections=100",
		"start").CombinedOutput()
	if err != nil {
		return fmt.Errorf("postgres on port %d did not start: %v: %s\nits log:\n%s", p.port, err, out, tail(log, 20))
	}
	p.running = true
	return nil
}

// Stop shuts the server down cleanly (pg_ctl's fast mode: connections
// are closed, a checkpoint is written).
func (p *Postgres) Stop() error { return p.stop("fast") }

// Kill stops the server as a crash would (immediate mode: no checkpoint,
// connections cut; the next start recovers from the WAL).
func (p *Postgres) Kill() error { return p.stop("immediate") }

func (p *Postgres) stop(mode string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		return nil
	}
	if out, err := p.tool("pg_ctl", "-D", p.data, "-m", mode, "-w", "-t", "60", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("postgres: pg_ctl stop -m %s: %v: %s", mode, err, out)
	}
	p.running = false
	return nil
}
