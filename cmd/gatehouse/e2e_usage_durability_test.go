package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/account"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/store/sqlite"
)

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
	waitFor(t, 30*time.Second, "PostgreSQL", func() bool {
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
// file, through the store's own log reader (the records are kept a batch
// to a row, encoded).
func sqliteRecordIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string]bool{}
	q := account.LogQuery{Limit: 1000}
	for {
		page, err := st.Logs(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			out[r.RequestID] = true
		}
		if q.Cursor = page.Next; q.Cursor == "" {
			return out
		}
	}
}
