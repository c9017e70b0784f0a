package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"

	"gatehouse/internal/limit"
)

// BenchmarkRedisCPU is what admissions and their settles cost Redis
// itself, with G requests at once on one Limiter: Redis's own CPU a
// request (INFO cpu) and its script calls a request (INFO
// commandstats), the figures admission batching changes (BENCHMARKS.md,
// "Admissions batched"). They mean something only with the test Redis
// local and otherwise idle:
//
//	go test -run '^$' -bench RedisCPU -benchtime 40000x ./internal/store/redis/
func BenchmarkRedisCPU(b *testing.B) {
	for _, g := range []int{1, 8, 32} {
		b.Run(fmt.Sprint("G=", g), func(b *testing.B) {
			c := testClient(b)
			l := newLimiter(b, c, Options{Prefix: testPrefix(b, c), SettleQueue: 1 << 16})
			ctx := context.Background()
			a := rpmAdmission(1 << 40)
			a.Budgets = []limit.Budget{{Scope: limit.ScopeKey, ID: "key_1", Limit: 1 << 60, Period: limit.Month}}
			a.Cost = 2000
			before := redisCPU(b, c)
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range g {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						d, err := l.Admit(ctx, a)
						if err != nil {
							b.Error(err)
							return
						}
						l.Settle(ctx, d.Reservation, limit.Actual{Tokens: 5, Cost: 1000})
					}
				})
			}
			wg.Wait()
			// Closing sends the settles still queued: their cost is in.
			if err := l.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			after := redisCPU(b, c)
			n := float64(b.N)
			b.ReportMetric((after.user-before.user)*1e6/n, "redis-user-µs/op")
			b.ReportMetric((after.sys-before.sys)*1e6/n, "redis-sys-µs/op")
			b.ReportMetric((after.scripts-before.scripts)/n, "scripts/op")
		})
	}
}

// redisUse is what Redis reports it has done so far: its CPU (seconds)
// and the script calls it ran.
type redisUse struct{ user, sys, scripts float64 }

// redisCPU reads Redis's INFO cpu and commandstats.
func redisCPU(b *testing.B, c rueidis.Client) redisUse {
	b.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("cpu", "commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var u redisUse
	for line := range strings.Lines(info) {
		line = strings.TrimSpace(line)
		name, value, _ := strings.Cut(line, ":")
		switch name {
		case "used_cpu_user":
			u.user, err = strconv.ParseFloat(value, 64)
		case "used_cpu_sys":
			u.sys, err = strconv.ParseFloat(value, 64)
		case "cmdstat_evalsha", "cmdstat_eval":
			calls, _, _ := strings.Cut(strings.TrimPrefix(value, "calls="), ",")
			var n float64
			n, err = strconv.ParseFloat(calls, 64)
			u.scripts += n
		}
		if err != nil {
			b.Fatalf("INFO %q: %v", line, err)
		}
	}
	return u
}
