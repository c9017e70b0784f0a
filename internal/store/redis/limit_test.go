package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"gatehouse/internal/store/redis/redistest"
	"io"
	"math/big"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/limit"
)

// testClient connects to the real Redis that `make test` starts.
func testClient(t testing.TB) rueidis.Client {
	t.Helper()
	url := os.Getenv("GATEHOUSE_TEST_REDIS")
	if url == "" {
		t.Fatal("GATEHOUSE_TEST_REDIS is not set: these tests need the real Redis server that `make test` starts; " +
			"to run them by hand: eval \"$(scripts/test-services start)\" and go test again")
	}
	c, err := NewClient(url)
	if err != nil {
		t.Fatalf("connect to GATEHOUSE_TEST_REDIS (is it running? scripts/test-services start): %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// testPrefix is a key prefix of this test alone; its keys are deleted
// when the test ends.
func testPrefix(t testing.TB, c rueidis.Client) string {
	var b [6]byte
	rand.Read(b[:])
	p := "ghtest:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() { deleteMatching(c, p+"*") })
	return p
}

func newLimiter(t testing.TB, c rueidis.Client, o Options) *Limiter {
	t.Helper()
	l, err := New(context.Background(), c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

type fakeClock struct{ ns atomic.Int64 }

func newClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }

var t0 = time.Now().UTC().Truncate(time.Second)

func rpmAdmission(rpm int64) limit.Admission {
	return limit.Admission{Tag: "proj_1", Rates: []limit.Rate{
		{Scope: limit.ScopeKey, ID: "key_1", RPM: rpm},
		{Scope: limit.ScopeProject, ID: "proj_1", RPM: 100_000, TPM: 1e9},
		{Scope: limit.ScopeKeyModel, ID: limit.KeyModelID("key_1", "llama3:8b"), RPM: 100_000},
	}, Tokens: 10}
}

// admitConcurrently runs n Admit calls at once, spread over the
// admitters, and counts those admitted.
func admitConcurrently(t *testing.T, admitters []limit.Admitter, n int, a limit.Admission) int64 {
	var ok atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			d, err := admitters[i%len(admitters)].Admit(context.Background(), a)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				ok.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	return ok.Load()
}

func TestExactRPM(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, Timeout: 10 * time.Second})
	if got := admitConcurrently(t, []limit.Admitter{l}, 500, rpmAdmission(100)); got != 100 {
		t.Fatalf("admitted %d of 500 against rpm=100, want exactly 100", got)
	}
}

// Three Limiters with their own connections stand in for three gatehouse
// processes sharing one Redis.
func TestExactRPMThreeReplicas(t *testing.T) {
	clk := newClock(t0)
	var admitters []limit.Admitter
	var prefix string
	for i := range 3 {
		c := testClient(t)
		if i == 0 {
			prefix = testPrefix(t, c)
		}
		admitters = append(admitters, newLimiter(t, c, Options{Prefix: prefix, Now: clk.Now, Timeout: 10 * time.Second}))
	}
	if got := admitConcurrently(t, admitters, 500, rpmAdmission(100)); got != 100 {
		t.Fatalf("three replicas admitted %d of 500 against rpm=100, want exactly 100", got)
	}
}

func TestRefillFakeClock(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now})
	ctx := context.Background()
	a := limit.Admission{Tag: "p", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k", RPM: 60}}}
	for i := range 60 {
		if d, err := l.Admit(ctx, a); err != nil || !d.Allowed {
			t.Fatalf("request %d: %v %+v", i, err, d.Refused)
		}
	}
	d, err := l.Admit(ctx, a)
	if err != nil || d.Allowed || d.Refused.Kind != limit.KindRequests || d.RetryAfter != time.Second {
		t.Fatalf("61st: %v %+v", err, d)
	}
	if d.Requests != (limit.Quota{Limit: 60, Remaining: 0, Reset: time.Minute}) {
		t.Errorf("quota %+v", d.Requests)
	}
	clk.Advance(999 * time.Millisecond)
	if d, _ := l.Admit(ctx, a); d.Allowed {
		t.Fatal("admitted before a request's worth refilled")
	}
	clk.Advance(time.Millisecond)
	if d, _ := l.Admit(ctx, a); !d.Allowed {
		t.Fatal("refused after one second refilled one request")
	}
	if d, _ := l.Admit(ctx, a); d.Allowed {
		t.Fatal("one second refilled more than one request")
	}
	clk.Advance(30 * time.Second)
	if d, _ := l.Admit(ctx, a); !d.Allowed || d.Requests.Remaining != 29 {
		t.Fatalf("after 30s: %+v", d)
	}
}

func TestTokensAndSettle(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	prefix := testPrefix(t, c)
	l := newLimiter(t, c, Options{Prefix: prefix, Now: clk.Now})
	ctx := context.Background()
	budget := limit.Budget{Scope: limit.ScopeKey, ID: "k", Name: "ci", Limit: limit.USD(1), Period: limit.Month}
	a := limit.Admission{Tag: "p", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k", TPM: 1000}},
		Budgets: []limit.Budget{budget}, Tokens: 600, Cost: limit.USD(0.3)}
	d1, err := l.Admit(ctx, a)
	if err != nil || !d1.Allowed || d1.Tokens.Remaining != 400 {
		t.Fatalf("first: %v %+v", err, d1)
	}
	d2, _ := l.Admit(ctx, a)
	if d2.Allowed || d2.Refused.Kind != limit.KindTokens {
		t.Fatalf("second should be refused on tokens: %+v", d2)
	}
	// Settle twice: the second is a no-op.
	for range 2 {
		if err := l.Settle(ctx, d1.Reservation, limit.Actual{Tokens: 100, Cost: limit.USD(0.1)}); err != nil {
			t.Fatal(err)
		}
	}
	waitSettled(t, l, "p", budget, clk.Now(), limit.USD(0.1))
	d3, _ := l.Admit(ctx, a)
	if !d3.Allowed || d3.Tokens.Remaining != 300 {
		t.Fatalf("after settling: %+v", d3)
	}
	d4, _ := l.Admit(ctx, a)
	if d4.Allowed || d4.Refused.Kind != limit.KindTokens {
		t.Fatalf("%+v", d4)
	}
	// Budget refusal names the budget.
	d5, _ := l.Admit(ctx, limit.Admission{Tag: "p", Budgets: []limit.Budget{budget}, Cost: limit.USD(0.95)})
	if d5.Allowed || d5.Refused.Message() != "budget of key ci (month) exhausted" || d5.Refused.Code() != "budget_exceeded" {
		t.Fatalf("%+v %q", d5, d5.Refused.Message())
	}
	_, end := limit.Month.Span(clk.Now())
	if d5.RetryAfter != end.Sub(clk.Now()) {
		t.Errorf("retry after %v", d5.RetryAfter)
	}
}

func mustStart(p limit.Period, t time.Time) string { s, _ := p.Span(t); return s }

func waitSettled(t *testing.T, l *Limiter, tag string, b limit.Budget, at time.Time, want limit.Micros) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := l.Spent(context.Background(), tag, b, at)
		if err != nil {
			t.Fatal(err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spent %v, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A $1.00 budget under 200 concurrent reserve+settle never settles above
// $1.00: estimates are worst cases, actuals at most the estimate.
func TestBudgetNeverOverspent(t *testing.T) {
	c := testClient(t)
	spend := &memSpend{}
	l, err := New(context.Background(), c, Options{Prefix: testPrefix(t, c), Timeout: 10 * time.Second, Spend: spend})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeCustomer, ID: "cus_1", Limit: limit.USD(1), Period: limit.Total}
	const est = limit.Micros(30_000)
	var wg sync.WaitGroup
	var settled atomic.Int64
	for range 200 {
		wg.Go(func() {
			d, err := l.Admit(ctx, limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: est})
			if err != nil {
				t.Error(err)
				return
			}
			if !d.Allowed {
				return
			}
			n, _ := rand.Int(rand.Reader, big.NewInt(int64(est)+1))
			act := limit.Micros(n.Int64())
			settled.Add(int64(act))
			l.Settle(ctx, d.Reservation, limit.Actual{Cost: act})
		})
	}
	wg.Wait()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := l.Spent(ctx, "p", b, time.Now())
	if got != limit.Micros(settled.Load()) || got > limit.USD(1) {
		t.Fatalf("counter %v, settled %v, budget 1.000000", got, limit.Micros(settled.Load()))
	}
	if p := spend.total(); p != settled.Load() {
		t.Errorf("durable record %d, settled %d", p, settled.Load())
	}
}

func TestPeriodRollover(t *testing.T) {
	c := testClient(t)
	clk := newClock(time.Date(2031, 1, 31, 23, 59, 59, 0, time.UTC))
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now})
	ctx := context.Background()
	for _, p := range []limit.Period{limit.Day, limit.Month} {
		a := limit.Admission{Tag: "p", Budgets: []limit.Budget{{Scope: limit.ScopeKey, ID: "k" + string(p), Limit: limit.USD(1), Period: p}}, Cost: limit.USD(1)}
		clk.Set(time.Date(2031, 1, 31, 23, 59, 59, 0, time.UTC))
		if d, _ := l.Admit(ctx, a); !d.Allowed {
			t.Fatal("first refused")
		}
		if d, _ := l.Admit(ctx, a); d.Allowed {
			t.Fatal("second admitted in the same period")
		}
		clk.Set(time.Date(2031, 2, 1, 0, 0, 0, 0, time.UTC))
		if d, _ := l.Admit(ctx, a); !d.Allowed {
			t.Fatalf("%s: refused after rollover: %+v", p, d.Refused)
		}
	}
}

func TestNoScriptRecovery(t *testing.T) {
	c := testClient(t)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c)})
	ctx := context.Background()
	for _, r := range onEveryNode(ctx, c, func(b rueidis.Builder) rueidis.Completed { return b.ScriptFlush().Build() }) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
	d, err := l.Admit(ctx, rpmAdmission(10))
	if err != nil || !d.Allowed {
		t.Fatalf("after SCRIPT FLUSH: %v %+v", err, d)
	}
	// The node holding the admission's keys has it again (on a cluster,
	// one of several).
	cached := false
	for _, r := range onEveryNode(ctx, c, func(b rueidis.Builder) rueidis.Completed { return b.ScriptExists().Sha1(l.admit.sha).Build() }) {
		exists, err := r.AsIntSlice()
		if err != nil || len(exists) != 1 {
			t.Fatalf("SCRIPT EXISTS: %v %v", exists, err)
		}
		cached = cached || exists[0] == 1
	}
	if !cached {
		t.Fatal("script not cached again after recovery")
	}
}

// commandCalls reads calls per command from Redis's own INFO commandstats.
func commandCalls(t testing.TB, c rueidis.Client) map[string]int64 {
	t.Helper()
	s, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for line := range strings.Lines(s) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		m[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(n, 10, 64)
	}
	return m
}

func TestOneCommandPerAdmission(t *testing.T) {
	// A private server: the shared one counts other packages' commands too.
	c, err := NewClient(redistest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c)})
	ctx := context.Background()
	a := rpmAdmission(1e6)
	a.Budgets = []limit.Budget{
		{Scope: limit.ScopeKey, ID: "key_1", Limit: limit.USD(1e6), Period: limit.Month},
		{Scope: limit.ScopeProject, ID: "proj_1", Limit: limit.USD(1e6), Period: limit.Day},
		{Scope: limit.ScopeCustomer, ID: "cus_1", Limit: limit.USD(1e6), Period: limit.Total},
	}
	a.Cost = 1
	l.Admit(ctx, a) // scripts cached
	before := commandCalls(t, c)
	const n = 200
	for range n {
		if d, err := l.Admit(ctx, a); err != nil || !d.Allowed {
			t.Fatalf("%v %+v", err, d.Refused)
		}
	}
	after := commandCalls(t, c)
	if got := after["evalsha"] - before["evalsha"]; got != n {
		t.Errorf("%d admissions ran %d EVALSHA, want exactly one each", n, got)
	}
	if got := after["eval"] - before["eval"]; got != 0 {
		t.Errorf("%d EVAL during admissions", got)
	}
}

// proxy forwards TCP to Redis until closed, so a test can take Redis
// away from a client.
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	// hung, once set, drops Redis's replies: a server that takes calls
	// and never answers.
	hung atomic.Bool
	// refusing, while set, hangs up every new connection at once: Redis
	// is down until restore.
	refusing atomic.Bool
}

// cut takes Redis away (the connections open are closed, new ones hung
// up on) until restore.
func (p *proxy) cut() {
	p.refusing.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// restore brings Redis back after cut: new connections go through again.
func (p *proxy) restore() { p.refusing.Store(false) }

// hang makes the proxy drop every reply from now on.
func (p *proxy) hang() { p.hung.Store(true) }

// forward copies Redis's replies to the client, or drops them once hung.
func (p *proxy) forward(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && !p.hung.Load() {
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	client.Close()
}

// proxiedClient is a client of the test Redis that talks through a
// proxy the test can cut, with no client-side cache or retries (they
// would hide the cut); the client closes with the test. set changes the
// client's options before it is made.
func proxiedClient(t *testing.T, set ...func(*rueidis.ClientOption)) (rueidis.Client, *proxy) {
	t.Helper()
	opt, err := rueidis.ParseURL(os.Getenv("GATEHOUSE_TEST_REDIS"))
	if err != nil {
		t.Fatalf("GATEHOUSE_TEST_REDIS (run under `make test` or eval \"$(scripts/test-services start)\"): %v", err)
	}
	p := startProxy(t, opt.InitAddress[0])
	opt.InitAddress = []string{p.ln.Addr().String()}
	opt.DisableCache = true
	opt.DisableRetry = true
	for _, f := range set {
		f(&opt)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, p
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			if p.refusing.Load() { // checked under the lock cut takes
				p.mu.Unlock()
				in.Close()
				out.Close()
				continue
			}
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go p.forward(in, out)
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func TestRedisDownPolicies(t *testing.T) {
	c, p := proxiedClient(t)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, testClient(t)), Timeout: 200 * time.Millisecond})
	ctx := context.Background()
	if d, err := l.Admit(ctx, rpmAdmission(100)); err != nil || !d.Allowed {
		t.Fatalf("through the proxy: %v %+v", err, d)
	}
	p.close()
	_, err := l.Admit(ctx, rpmAdmission(100))
	if !errors.Is(err, limit.ErrUnavailable) {
		t.Fatalf("Redis gone: err %v, want ErrUnavailable", err)
	}

	closed := &limit.Fallback{Primary: l, Policy: limit.FailClosed}
	if _, err := closed.Admit(ctx, rpmAdmission(100)); !errors.Is(err, limit.ErrUnavailable) {
		t.Fatalf("fail closed: %v", err)
	}
	local, err := limit.NewEmbedded(ctx, limit.Options{Now: newClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close(ctx)
	open := &limit.Fallback{Primary: l, Local: local, Policy: limit.FailOpen, Replicas: 3}
	n := 0
	for range 100 {
		d, err := open.Admit(ctx, rpmAdmission(90))
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			n++
			open.Settle(ctx, d.Reservation, limit.Actual{})
		}
	}
	if n != 30 {
		t.Errorf("fail open admitted %d, want this replica's share 30", n)
	}
}

// TestFailClosedRecoversAtOnce: failing closed, admissions succeed as
// soon as Redis is back, though the cooldown (an hour here) has not run
// out: one failure does not refuse everything for a cooldown while Redis
// answers. A connection the client made while Redis was away can fail
// its first call after (the client then redials), so each of the
// client's connections (at most 4, rueidis's default) may cost one
// refusal; before the probe, all 20 were refused.
func TestFailClosedRecoversAtOnce(t *testing.T) {
	c, p := proxiedClient(t)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, testClient(t)), Timeout: 200 * time.Millisecond})
	f := &limit.Fallback{Primary: l, Policy: limit.FailClosed, Cooldown: time.Hour}
	t.Cleanup(func() { f.Close(context.Background()) })
	ctx := context.Background()
	if d, err := f.Admit(ctx, rpmAdmission(100)); err != nil || !d.Allowed {
		t.Fatalf("through the proxy: %v %+v", err, d)
	}
	p.cut()
	for i := range 3 {
		if _, err := f.Admit(ctx, rpmAdmission(100)); !errors.Is(err, limit.ErrUnavailable) {
			t.Fatalf("admission %d, Redis cut: %v, want ErrUnavailable", i, err)
		}
	}
	p.restore()
	refused := 0
	for i := range 20 {
		d, err := f.Admit(ctx, rpmAdmission(100))
		switch {
		case errors.Is(err, limit.ErrUnavailable):
			refused++
		case err != nil || !d.Allowed:
			t.Fatalf("admission %d after Redis came back: %v %+v", i, err, d)
		}
	}
	if refused > 4 {
		t.Errorf("%d of 20 admissions refused after Redis came back, want at most one per client connection (4)", refused)
	}
}

// TestFailOpenRecoversAtOnce: failing open, admissions go to Redis again
// as soon as Redis is back and the first probe is due (an eighth of the
// cooldown, moved by hand here), not a cooldown (an hour) later. The
// local share is one request a minute (RPM 100 over 100 replicas), so a
// local admission is told from Redis's by whether it is allowed. While
// Redis is away, the probes are the only calls that wait for it: one per
// cooldown. A connection the client made while Redis was away can fail
// its first call after, so the probe may fail once (the client has one
// connection here) before one lands; the test moves the clock to the next probe after
// each, a Cooldown on, where the outage is not over yet.
func TestFailOpenRecoversAtOnce(t *testing.T) {
	// One connection: rueidis picks one of its connections at random for
	// each command, so with several a connection broken by the cut can
	// answer its first command (EOF) after the probe that ended the
	// outage went through another one, and start a new outage. What is
	// tested here is the fallback's recovery, not when the client's
	// connections find out they were cut.
	c, p := proxiedClient(t, func(o *rueidis.ClientOption) { o.PipelineMultiplex = -1 })
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, testClient(t)), Timeout: 200 * time.Millisecond})
	ctx := context.Background()
	local, err := limit.NewEmbedded(ctx, limit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close(ctx)
	clk := newClock(t0)
	var reports int
	f := &limit.Fallback{Primary: l, Local: local, Policy: limit.FailOpen, Replicas: 100, Cooldown: time.Hour, Now: clk.Now,
		OnDegraded: func(error) { reports++ }}
	t.Cleanup(func() { f.Close(context.Background()) })
	admit := func() bool {
		t.Helper()
		d, err := f.Admit(ctx, rpmAdmission(100))
		if err != nil {
			t.Fatalf("failing open: %v", err)
		}
		if d.Allowed {
			f.Settle(ctx, d.Reservation, limit.Actual{})
		}
		return d.Allowed
	}
	if !admit() {
		t.Fatal("through the proxy: refused")
	}
	p.cut()
	allowed := 0
	for range 10 {
		if admit() {
			allowed++
		}
	}
	if allowed != 1 || !f.Degraded() {
		t.Fatalf("Redis cut: %d of 10 admitted, degraded %v; want the local share of 1, degraded", allowed, f.Degraded())
	}
	clk.Advance(time.Hour / 8)
	admit() // the probe, Redis still away
	if !f.Degraded() {
		t.Fatal("a probe Redis did not answer ended the outage")
	}
	p.restore()
	if admit() {
		t.Fatal("Redis back, before the next probe is due: admitted; want the local share, spent")
	}
	probes := 0
	for admitted := false; !admitted; {
		if probes++; probes > 2 {
			t.Fatalf("Redis back: %d probes failed, want at most one (the client's one connection)", probes-1)
		}
		clk.Advance(time.Hour) // the next probe is due, the outage not over
		if !f.Degraded() {
			t.Fatal("the outage ran out before its probe: want a probe to end it")
		}
		admitted = admit()
	}
	if f.Degraded() {
		t.Error("still degraded after Redis answered")
	}
	for i := range 10 {
		if !admit() {
			t.Fatalf("admission %d after the outage: refused; want Redis's admission", i)
		}
	}
	if reports != 1 {
		t.Errorf("outage reported %d times, want once", reports)
	}
}

func TestSeedRestoresLostCounters(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	spend := &memSpend{}
	start, _ := limit.Month.Span(t0)
	spend.m = map[limit.BudgetKey]int64{
		{Tag: "p", Scope: limit.ScopeKey, ID: "k", Period: limit.Month, Start: start}:        900_000,
		{Tag: "p", Scope: limit.ScopeKey, ID: "k", Period: limit.Month, Start: "2000-01-01"}: 5,
	}
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, Spend: spend})
	ctx := context.Background()
	n, err := l.Seed(ctx)
	if err != nil || n != 1 {
		t.Fatalf("seed: %d %v", n, err)
	}
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(1), Period: limit.Month}
	if d, _ := l.Admit(ctx, limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: limit.USD(0.2)}); d.Allowed {
		t.Fatal("seeded spend ignored")
	}
	if n, _ := l.Seed(ctx); n != 0 {
		t.Errorf("second seed overwrote %d live counters", n)
	}
}

type memSpend struct {
	mu sync.Mutex
	m  map[limit.BudgetKey]int64
}

func (s *memSpend) LoadSpend(_ context.Context, since string) (map[limit.BudgetKey]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[limit.BudgetKey]int64{}
	for k, v := range s.m {
		if k.Start == "" || k.Start >= since {
			out[k] = v
		}
	}
	return out, nil
}

func (s *memSpend) AddSpend(_ context.Context, d map[limit.BudgetKey]int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[limit.BudgetKey]int64{}
	}
	for k, v := range d {
		s.m[k] += v
	}
	return nil
}

func (s *memSpend) total() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, v := range s.m {
		n += v
	}
	return n
}

func BenchmarkRedisAdmitSettle(b *testing.B) {
	c := testClient(b)
	l := newLimiter(b, c, Options{Prefix: testPrefix(b, c)})
	ctx := context.Background()
	a := rpmAdmission(1 << 40)
	a.Budgets = []limit.Budget{{Scope: limit.ScopeKey, ID: "key_1", Limit: 1 << 60, Period: limit.Month}}
	a.Cost = 2000
	b.ReportAllocs()
	for b.Loop() {
		d, err := l.Admit(ctx, a)
		if err != nil {
			b.Fatal(err)
		}
		l.Settle(ctx, d.Reservation, limit.Actual{Tokens: 5, Cost: 1000})
	}
}

func BenchmarkRedisAdmitParallel(b *testing.B) {
	c := testClient(b)
	l := newLimiter(b, c, Options{Prefix: testPrefix(b, c), SettleQueue: 1 << 16})
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		a := rpmAdmission(1 << 40)
		a.Rates[0].ID = "key_" + strconv.FormatInt(n.Add(1), 10)
		a.Budgets = []limit.Budget{{Scope: limit.ScopeKey, ID: a.Rates[0].ID, Limit: 1 << 60, Period: limit.Month}}
		a.Cost = 2000
		for pb.Next() {
			d, err := l.Admit(ctx, a)
			if err != nil {
				b.Fatal(err)
			}
			l.Settle(ctx, d.Reservation, limit.Actual{Tokens: 5, Cost: 1000})
		}
	})
}

// TestBudgetLeft: the script reports what the tightest budget has left
// after the admission, as the embedded admitter does.
func TestBudgetLeft(t *testing.T) {
	c := testClient(t)
	l, err := New(context.Background(), c, Options{Prefix: testPrefix(t, c), Timeout: 10 * time.Second, Spend: &memSpend{}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	ctx := context.Background()
	key := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(1), Period: limit.Month}
	project := limit.Budget{Scope: limit.ScopeProject, ID: "p", Limit: limit.USD(0.5), Period: limit.Month}
	rate := limit.Rate{Scope: limit.ScopeKey, ID: "k", RPM: 100}
	for i, want := range []struct {
		budgets []limit.Budget
		allowed bool
		left    limit.Micros
	}{
		{[]limit.Budget{key}, true, limit.USD(0.7)},
		{[]limit.Budget{key, project}, true, limit.USD(0.2)},
		{[]limit.Budget{key, project}, false, limit.USD(0.2)},
		{nil, true, 0},
	} {
		d, err := l.Admit(ctx, limit.Admission{Tag: "t", Rates: []limit.Rate{rate}, Budgets: want.budgets, Cost: limit.USD(0.3)})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want.allowed || d.BudgetLeft != want.left || d.Budgeted != (want.budgets != nil) {
			t.Fatalf("admission %d: allowed %v budgeted %v left %v; want %v %v", i, d.Allowed, d.Budgeted, d.BudgetLeft, want.allowed, want.left)
		}
	}
}

// TestSpentMany: one call reads the counters of several tags, scopes and
// periods, in order, each as Admit left it (reservations in flight
// included) and Settle corrected it; a counter never touched, or of
// another period, reads 0; braces in a tag are mapped as Admit maps them.
func TestSpentMany(t *testing.T) {
	c := testClient(t)
	clk := newClock(time.Date(2031, 3, 10, 12, 0, 0, 0, time.UTC))
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now})
	ctx := context.Background()
	key := limit.Budget{Scope: limit.ScopeKey, ID: "key_1", Limit: limit.USD(5), Period: limit.Month}
	proj := limit.Budget{Scope: limit.ScopeProject, ID: "proj_1", Limit: limit.USD(50), Period: limit.Total}
	cus := limit.Budget{Scope: limit.ScopeCustomer, ID: "cus_1", Limit: limit.USD(1), Period: limit.Day}
	odd := limit.Budget{Scope: limit.ScopeKey, ID: "static:k", Limit: limit.USD(5), Period: limit.Week}

	d, err := l.Admit(ctx, limit.Admission{Tag: "proj_1", Budgets: []limit.Budget{key, proj, cus}, Cost: limit.USD(0.25)})
	if err != nil || !d.Allowed {
		t.Fatalf("admit: %+v %v", d, err)
	}
	if err := l.Settle(ctx, d.Reservation, limit.Actual{Cost: limit.USD(0.1)}); err != nil {
		t.Fatal(err)
	}
	waitSettled(t, l, "proj_1", key, clk.Now(), limit.USD(0.1))
	// In flight: reserved, not settled.
	if d, err := l.Admit(ctx, limit.Admission{Tag: "proj_1", Budgets: []limit.Budget{key}, Cost: limit.USD(0.5)}); err != nil || !d.Allowed {
		t.Fatalf("admit: %+v %v", d, err)
	}
	if d, err := l.Admit(ctx, limit.Admission{Tag: "static:{x}", Budgets: []limit.Budget{odd}, Cost: limit.USD(0.03)}); err != nil || !d.Allowed {
		t.Fatalf("admit: %+v %v", d, err)
	}

	now := clk.Now()
	k := func(tag string, b limit.Budget, at time.Time) limit.BudgetKey {
		return limit.BudgetKey{Tag: tag, Scope: b.Scope, ID: b.ID, Period: b.Period, Start: mustStart(b.Period, at)}
	}
	got, err := l.SpentMany(ctx, []limit.BudgetKey{
		k("proj_1", key, now),
		k("proj_1", proj, now),
		k("proj_1", cus, now),
		k("static:{x}", odd, now),
		k("proj_1", cus, now.AddDate(0, 0, -1)), // yesterday: nothing spent
		k("proj_2", key, now),                   // another tag: another counter
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []limit.Micros{limit.USD(0.6), limit.USD(0.1), limit.USD(0.1), limit.USD(0.03), 0, 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("SpentMany = %v, want %v", got, want)
	}
	if got, err := l.SpentMany(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("SpentMany(nil) = %v %v", got, err)
	}
}

// TestSpentManyFailure: a read that fails (here its context is gone) is
// an error, never a spend of zero.
func TestSpentManyFailure(t *testing.T) {
	c := testClient(t)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.SpentMany(ctx, []limit.BudgetKey{{Tag: "p", Scope: limit.ScopeKey, ID: "k", Period: limit.Total}}); err == nil {
		t.Fatal("SpentMany on a canceled context: no error")
	}
}

// A batch of settles goes out as one pipeline: every one applied once,
// those whose script Redis lost (SCRIPT FLUSH) retried alone, and the
// batch sent again changes nothing. Five projects, so on a cluster the
// pipeline spans slots and nodes.
