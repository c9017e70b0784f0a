package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/mockllm"
	"gatehouse/internal/store/redis/redistest"
)

// budgetConfig is cluster mode on a private Redis (the tests below lose
// its data on purpose) for one key with a budget, on a priced model. The
// key and its project are named afresh each time: their spend outlives
// the test in the shared PostgreSQL.
func budgetConfig(t *testing.T, up *upstream, redisURL, budget, extra string) string {
	name := strings.TrimSuffix(uniquePrefix(), ":")
	return `listen: 127.0.0.1:0
providers:
` + upProvider(up) + `keys:
  - {key: ` + clientKey + `, name: ` + name + `, project: ` + name + `, budget: ` + budget + `}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
` + clusterStorageOn(t, redisURL) + extra
}

// postChat sends one small chat completion (output capped, so its
// reservation is small) and returns the status.
func postChat(t *testing.T, base, prompt string, maxTokens int) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(
		`{"model":"chat","max_tokens":`+strconv.Itoa(maxTokens)+`,"messages":[{"role":"user","content":"`+prompt+`"}]}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBudgetSurvivesRedisLosingItsData: a key spends its $0.0005 budget;
// Redis then loses everything (as a restart without persistence or a
// failover to an empty replica would); the key stays refused, because
// the first admission after the loss rebuilds the counters from
// PostgreSQL before admitting anything against them. Before this, the
// same key was admitted for a second budget's worth.
func TestBudgetSurvivesRedisLosingItsData(t *testing.T) {
	redisURL := redistest.Start(t)
	up := startUpstream(t, mockllm.Options{})
	gw := startGateway(t, budgetConfig(t, up, redisURL, "{usd: 0.0005, period: month}", ""))
	spend := func(n int) (admitted, refused int) {
		for range n {
			switch code := postChat(t, gw.URL, "spend", 20); code {
			case http.StatusOK:
				admitted++
			case http.StatusTooManyRequests:
				refused++
			default:
				t.Fatalf("status %d", code)
			}
		}
		return admitted, refused
	}
	admitted, refused := spend(200)
	if admitted == 0 || refused == 0 {
		t.Fatalf("before the loss: %d admitted, %d refused; want the budget to run out", admitted, refused)
	}
	time.Sleep(time.Second) // settled spend reaches PostgreSQL (limits.flush_every: 250ms)

	opt, err := rueidis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := rc.Do(context.Background(), rc.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if again, _ := spend(50); again != 0 {
		t.Fatalf("after Redis lost its data the spent key was admitted %d more times (before: %d admitted)", again, admitted)
	}
}

// TestCrashedReplicaReleasesItsReservations: a replica killed with
// SIGKILL while its streams hold most of a budget leaves their
// reservations behind; the other replica refuses the key meanwhile, and
// admits it again once the reservations' TTL (limits.reservation_ttl)
// has passed and a sweep released them — within the documented bound,
// the TTL plus a quarter of it.
func TestCrashedReplicaReleasesItsReservations(t *testing.T) {
	redisURL := redistest.Start(t)
	up := startUpstream(t, mockllm.Options{})
	// Requests of 1,000 output tokens reserve about $0.0006 each: three
	// fill most of the $0.002 budget.
	yaml := budgetConfig(t, up, redisURL, "{usd: 0.002, period: total}", "timeouts: {total: 2s}\n")
	yaml = strings.Replace(yaml, "limits: {", "limits: {reservation_ttl: 3s, ", 1)
	victim, _ := startProcess(t, yaml)
	survivor := startGateway(t, yaml)

	var wg sync.WaitGroup
	opened := make(chan struct{}, 3)
	for range 3 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, "http://"+victim.addr+"/v1/chat/completions", strings.NewReader(
				`{"model":"chat","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"slow @mock(chunks=50, tps=5)"}]}`))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				opened <- struct{}{}
				return
			}
			defer resp.Body.Close()
			if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err == nil {
				opened <- struct{}{} // streaming: the reservation is held
			}
			_, _ = bufio.NewReader(resp.Body).ReadString(0) // until the process dies
		})
	}
	for range 3 {
		<-opened
	}
	if code := postChat(t, survivor.URL, "one more", 1000); code != http.StatusTooManyRequests {
		t.Fatalf("with three streams in flight on the other replica: status %d, want 429", code)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	wg.Wait()
	for postChat(t, survivor.URL, "after the crash", 1000) != http.StatusOK {
		if time.Since(killed) > 3*time.Second+3*time.Second/4+2*time.Second {
			t.Fatalf("the crashed replica's reservations still count %v after the kill", time.Since(killed))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("released %v after the kill (reservation_ttl 3s)", time.Since(killed).Round(10*time.Millisecond))
}
