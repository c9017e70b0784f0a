package postgres

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/reqid"
	"gatehouse/internal/store/postgres/pgtest"
)

// BenchmarkRecordKeyOrder is what the order of request ids costs the
// usage records' table, whose primary key they are: batches of 1,000
// records written with WriteFreshRecords into a table that holds 300,000
// already, with ids as gatehouse makes them (reqid: in time order) and
// with 64 random bits as it made them before (BENCHMARKS.md, "Request
// ids in time order"). It reports the time a record; with
// GATEHOUSE_BENCH_PGDATA set to the server's data directory (the server
// on this machine), also the server's own CPU a record, its postmaster's
// and backends' utime and stime from /proc. Run it on purpose:
//
//	go test -run '^$' -bench RecordKeyOrder -benchtime 100000x ./internal/store/postgres/
func BenchmarkRecordKeyOrder(b *testing.B) {
	keys := map[string]func(time.Time) string{
		"reqid":  reqid.New,
		"random": func(time.Time) string { return "gh-" + strconv.FormatUint(rand.Uint64(), 16) },
	}
	for _, name := range []string{"random", "reqid", "random", "reqid"} { // in turns: the machine drifts
		key := keys[name]
		b.Run(name, func(b *testing.B) {
			s, err := Open(context.Background(), pgtest.DSN(b, "gh_bench_"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			base := time.Now().UTC()
			record := func(i int) account.Record {
				at := base.Add(time.Duration(i) * 200 * time.Microsecond) // 5,000 requests a second
				return account.Record{RequestID: key(at), Time: at, Endpoint: "/v1/chat/completions", KeyID: "key_bench",
					ProjectID: "proj_bench", Project: "bench", Model: "chat", ServedModel: "gpt-4o-mini", Provider: "openai",
					Deployment: "openai/gpt-4o-mini", Status: 200, PromptTokens: 120, CompletionTokens: 300, Cost: 1234,
					UsageSource: account.SourceReported, LatencyMS: 812.5, TTFTMS: 95.1, OverheadMS: 0.21,
					Cache: account.CacheBypass, Attempts: 1}
			}
			write := func(from, n int) {
				batch := make([]account.Record, 0, 1000)
				for i := from; i < from+n; i += len(batch) {
					batch = batch[:0]
					for j := i; j < min(i+1000, from+n); j++ {
						batch = append(batch, record(j))
					}
					if err := s.WriteFreshRecords(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
				}
			}
			const held = 300_000
			write(0, held)
			cpu0 := serverTicks(b)
			b.ResetTimer()
			write(held, b.N)
			b.StopTimer()
			if cpu0 >= 0 {
				b.ReportMetric(float64(serverTicks(b)-cpu0)*1e6/100/float64(b.N), "server-µs/record")
			}
		})
	}
}

// serverTicks is the CPU, in clock ticks (1/100 s), that the server of
// GATEHOUSE_BENCH_PGDATA and its child processes have used, those
// reaped included (cutime, cstime); -1 when the variable is unset.
func serverTicks(b *testing.B) int64 {
	dir := os.Getenv("GATEHOUSE_BENCH_PGDATA")
	if dir == "" {
		return -1
	}
	pid, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	postmaster, _, _ := strings.Cut(string(pid), "\n")
	procs, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	var ticks int64
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue // not a process, or gone
		}
		// After the command's closing parenthesis: state, ppid, … utime
		// is the 12th field from there, then stime, cutime, cstime.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndex(s, ") ")+1:])
		if len(f) < 15 || (p.Name() != postmaster && f[1] != postmaster) {
			continue
		}
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return ticks
}
