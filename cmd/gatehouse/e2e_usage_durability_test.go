package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/mockllm"
)

// privatePostgres is a PostgreSQL server of the test's own, which the
// test may kill and restart without disturbing the shared test server.
type privatePostgres struct {
	bin, data, port string
}

// startPrivatePostgres initialises and starts a server on a free
// loopback port (initdb and pg_ctl run as the postgres user, as
// PostgreSQL refuses root). A missing PostgreSQL fails the test.
func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bin := os.Getenv("GATEHOUSE_TEST_PGBIN")
	if bin == "" {
		bin = "/usr/lib/postgresql/15/bin"
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		t.Fatalf("PostgreSQL binaries not found in %s (scripts/test-services installs them): %v", bin, err)
	}
	dir, err := os.MkdirTemp("", "gatehouse-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &privatePostgres{bin: bin, data: filepath.Join(dir, "data"), port: freePort(t)}
	if out, err := exec.Command("install", "-d", "-o", "postgres", "-g", "postgres", "-m", "700", p.data).CombinedOutput(); err != nil {
		t.Fatalf("install: %v: %s", err, out)
	}
	p.pg(t, "initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	p.start(t)
	t.Cleanup(func() { p.stop(t, "fast") })
	return p
}

func (p *privatePostgres) pg(t *testing.T, tool string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(p.bin, tool), args...)
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(p.bin, tool)}, args...)...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", tool, err, out)
	}
}

func (p *privatePostgres) start(t *testing.T) {
	t.Helper()
	p.pg(t, "pg_ctl", "-D", p.data, "-l", filepath.Join(p.data, "server.log"), "-w", "-t", "60",
		"-o", "-p "+p.port+" -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off", "start")
}

// stop stops the server; mode "immediate" is a crash (no checkpoint,
// connections cut).
func (p *privatePostgres) stop(t *testing.T, mode string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(p.bin, "pg_ctl"), "-D", p.data, "-m", mode, "-w", "stop")
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", "-u", "postgres", "--", filepath.Join(p.bin, "pg_ctl"), "-D", p.data, "-m", mode, "-w", "stop")
	}
	_ = cmd.Run() // already stopped is fine
}

func (p *privatePostgres) dsn() string {
	return "postgres://postgres@127.0.0.1:" + p.port + "/postgres?sslmode=disable"
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// load sends requests from a few goroutines until stop is closed or n
// were sent, and returns the request ids of those that were answered.
func load(t *testing.T, base, key string, n int, stop <-chan struct{}, sent func(int)) []string {
	t.Helper()
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range n {
			select {
			case <-stop:
				return
			case next <- i:
			}
		}
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(
					`{"model":"chat","messages":[{"role":"user","content":"n`+fmt.Sprint(i)+`"}]}`))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // the process went away mid-request: no answer, no claim
				}
				resp.Body.Close()
				if id := resp.Header.Get("X-Gatehouse-Request-Id"); id != "" {
					mu.Lock()
					ids = append(ids, id)
					k := len(ids)
					mu.Unlock()
					if sent != nil {
						sent(k)
					}
				}
			}
		}()
	}
	wg.Wait()
	return ids
}

// TestUsageRecordsSurvivePostgresOutage kills PostgreSQL in the middle of
// a load and brings it back: records spill to disk meanwhile and every
// answered request's record arrives, exactly once.
func TestUsageRecordsSurvivePostgresOutage(t *testing.T) {
	pg := startPrivatePostgres(t)
	up := startUpstream(t, mockllm.Options{})
	dir := t.TempDir()
	spill := filepath.Join(dir, "spill")
	cfg := baseConfig(up, fmt.Sprintf("storage: {redis: '%s', postgres: '%s'}\nlimits: {redis_prefix: '%s', redis_timeout: 10s}\nusage: {spill_dir: %s}\n",
		os.Getenv("GATEHOUSE_TEST_REDIS"), pg.dsn(), uniquePrefix(), spill))
	if os.Getenv("GATEHOUSE_TEST_REDIS") == "" {
		t.Fatal(`needs Redis: run eval "$(scripts/test-services start)" first`)
	}
	gw, stop := stoppableGateway(t, dir, cfg)

	var outage sync.Once
	ids := load(t, gw.URL, clientKey, 400, nil, func(k int) {
		if k != 100 {
			return
		}
		outage.Do(func() {
			// One load worker stays here for the outage; the others go on.
			pg.stop(t, "immediate")
			waitFor(t, 15*time.Second, "records spilled to disk", func() bool {
				files, _ := filepath.Glob(filepath.Join(spill, "spill-*.jsonl"))
				return len(files) > 0
			})
			time.Sleep(300 * time.Millisecond)
			pg.start(t)
		})
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway warnings: %s", warnLines(gw.Logs.String()))
		}
	})
	if len(ids) < 390 {
		t.Fatalf("only %d of 400 requests answered while PostgreSQL was away", len(ids))
	}
	conn := connectPG(t, pg.dsn())
	waitFor(t, 20*time.Second, "every record in PostgreSQL", func() bool {
		var n int
		_ = conn.QueryRow(context.Background(), `SELECT count(*) FROM usage_records`).Scan(&n)
		return n >= len(ids)
	})
	stop()
	stored := map[string]bool{}
	rows, err := conn.Query(context.Background(), `SELECT request_id FROM usage_records`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
	}
	for _, id := range ids {
		if !stored[id] {
			t.Fatalf("answered request %s has no record", id)
		}
	}
	if len(stored) != len(ids) {
		t.Fatalf("%d records stored for %d answered requests", len(stored), len(ids))
	}
}

// warnLines keeps the lines of a log that are not request lines.
func warnLines(logs string) string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, `"msg":"request"`) && l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func connectPG(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	var conn *pgx.Conn
	waitFor(t, 10*time.Second, "PostgreSQL", func() bool {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return false
		}
		conn = c
		return true
	})
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestUsageRecordsSurviveSIGTERMAndRestart sends SIGTERM to a loaded
// embedded-mode process: every answered request's record is in the
// SQLite file after it exits, and a restarted process shows them.
func TestUsageRecordsSurviveSIGTERMAndRestart(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Latency: 2 * time.Millisecond})
	dir := t.TempDir()
	db := filepath.Join(dir, "gatehouse.db")
	cfg := baseConfig(up, "admin_key: "+testAdminKey+"\nstorage: {sqlite: "+db+"}\nusage: {spill_dir: "+filepath.Join(dir, "spill")+"}\n")
	p, _ := startProcess(t, cfg)
	var once sync.Once
	ids := load(t, "http://"+p.addr, clientKey, 100000, nil, func(k int) {
		if k == 300 {
			once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGTERM) })
		}
	})
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit: %v (logs: %s)", err, p.logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if len(ids) < 300 {
		t.Fatalf("only %d requests answered", len(ids))
	}
	stored := sqliteRecordIDs(t, db)
	for _, id := range ids {
		if !stored[id] {
			t.Fatalf("answered request %s has no record after SIGTERM (%d answered, %d stored)", id, len(ids), len(stored))
		}
	}

	// A restart on the same file shows them through the usage API.
	p2, _ := startProcess(t, cfg)
	var usage struct {
		Data []struct {
			Requests int64 `json:"requests"`
		} `json:"data"`
	}
	adminJSON(t, "http://"+p2.addr, "/admin/usage", &usage)
	if len(usage.Data) != 1 || usage.Data[0].Requests < int64(len(ids)) {
		t.Fatalf("after restart: usage %+v, want at least %d requests", usage.Data, len(ids))
	}
}

// sqliteRecordIDs reads the request ids of the usage records in a SQLite
// file.
func sqliteRecordIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT request_id FROM usage_records`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out[id] = true
	}
	return out
}
