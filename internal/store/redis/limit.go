// Package redis is the cluster-mode admission backend: a limit.Admitter
// whose counters live in Redis, shared by every gatehouse replica, through
// rueidis.
//
// Admit is one EVALSHA of one Lua script that checks and reserves every
// rate bucket and budget of the request, or reserves none (see package
// limit for why); admissions of one tag that arrive while its call is in
// flight share the next call (admitbatch.go). With leases (limit.Leaser), Lease hands out batches of
// the same counters instead, one script call per batch of a tag. Settle
// queues the correction; off the request path, the queued settles go to
// Redis in batches, one script call per hash tag per batch (settle.go),
// so a request costs Redis at most 1 + 1/B script calls. Admit counts Redis as
// unavailable when it has been silent for Options.Timeout, not when one
// reply is late (liveness.go). Settled spend is also written to a
// limit.SpendStore (PostgreSQL in cluster mode), the durable record from
// which Seed rebuilds budget counters Redis has lost.
//
// # Keys
//
//	<prefix>{<tag>}:rq:<scope>:<id>                   request bucket (GCRA arrival time, µs)
//	<prefix>{<tag>}:rt:<scope>:<id>                   token bucket
//	<prefix>{<tag>}:b:<scope>:<period>:<start>:<id>   budget counter (micro-dollars)
//	<prefix>{<tag>}:s:<settle call>                   settled marker of one batch of settles (10 minutes)
//	<prefix>{<tag>}:rl                                reservation ledger: open reservations by deadline, each with what it counts
//	<prefix>{<tag>}:r, <prefix>{<tag>}:rh             earlier versions' ledger: ids by deadline, and what each counts (swept)
//	<prefix>{<tag>}:seeded                            the tag's budget counters are in Redis
//	<prefix>{<tag>}:x:<exchange>                      a lease exchange ran (10 minutes; lease.go)
//	<prefix>ledgers                                   the tags with a ledger, for the sweep
//
// The tag is limit.Admission.Tag (the project ID): every key of one
// script call carries it, so on Redis Cluster they hash to one slot, as
// scripts require. The ID comes last, so IDs containing ':' (model names)
// cannot make two keys collide. Rate buckets expire once full; budget
// counters a day after their period ends; total budgets never.
//
// # When Redis loses its data, or a replica dies
//
// With a durable record, every admission with budgets checks its tag's
// seeded marker in the same script; a missing marker means the counters
// are gone, and the tag's are rebuilt from the record (seedTag) before
// the admission is tried again. Every admitted budget reservation is in
// its tag's ledger until settled; past its deadline (admission plus
// Options.ReservationTTL) the sweep of any replica takes its estimate
// back off the counters. A settle whose reservation has left the ledger
// (swept, or lost with the data) adds the actual cost whole instead of
// the correction.
//
// # When a settle is lost
//
// The queue holds Options.SettleQueue settles; when it is full, Settle
// waits for room (Options.SettleWait) rather than drop one, which paces
// requests to what Redis settles. Each batch's script call is tried
// Options.SettleAttempts times with backoff. A settle dropped (still no
// room after the wait, attempts exhausted, process crash) is logged and
// counted (SettleStats, the gatehouse_settles_lost_total metric) and
// leaves the reservation in place: the
// budget keeps the worst-case estimate instead of the actual cost, and the
// token buckets keep the estimate until they refill within the minute.
// The error is on the safe side, counting more spend than happened, never
// less, and the durable record (SpendStore) still receives the actual
// cost, since it is written independently. A retry after a lost reply is
// harmless: the call's settled marker makes the script apply once. Each
// reservation is settled by one call only (limit.Reservation.Claim).
//
// Times come from the replica's clock (Options.Now): replicas must keep
// their clocks in sync (NTP). A clock ahead by d lets through at most d's
// worth of refill more than the limit.
package redis

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/limit"
)

// Options configure a Limiter. The zero value is usable.
type Options struct {
	// Prefix starts every key ("gh:" when empty), so several gateways or
	// test runs can share one Redis.
	Prefix string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Timeout is how long Redis may stay silent (no reply to any call of
	// this replica) while an admission waits (250ms when zero); past it,
	// Admit returns limit.ErrUnavailable and the FailurePolicy applies.
	// While Redis answers, an admission waits for its reply up to eight
	// times Timeout (liveness.go says why).
	Timeout time.Duration
	// SettleQueue is how many settles may wait (4096 when zero). When it
	// is full, Settle waits for room (settle.go).
	SettleQueue int
	// SettleBatch is how many settles at most go to Redis in one script
	// call (DefaultSettleBatch when zero).
	SettleBatch int
	// SettleDelay is how long a batch of settles waits to fill before it
	// goes out (DefaultSettleDelay when zero; negative: not at all, only
	// what is queued already goes together).
	SettleDelay time.Duration
	// SettleWait is how long Settle waits for room in a full queue before
	// it drops the settle, loudly (DefaultSettleWait when zero).
	SettleWait time.Duration
	// SettleAttempts is how often a settle is tried (5 when zero).
	SettleAttempts int
	// Spend is the durable record of settled spend; nil for none.
	Spend limit.SpendStore
	// FlushEvery is how often settled spend is written to Spend.
	FlushEvery time.Duration
	// OnSettleLost, when set, is called for each settle given up on.
	OnSettleLost func(error)
	Log          *slog.Logger
	// ReservationTTL bounds how long a budget reservation its replica
	// never settles (a crash) keeps counting: past it, the sweep takes
	// it back off the budget (15 minutes when zero). It must outlast the
	// longest request: the models' total timeout.
	ReservationTTL time.Duration
	// SweepEvery is how often the sweep looks for such reservations (30
	// seconds when zero; negative: never, for tests that sweep by hand).
	SweepEvery time.Duration
	// ReplicaTimeout is how long after its last sign of life (every
	// sweep) a replica is taken for gone: only a gone replica's expired
	// reservations are released. Default three sweeps (90 seconds when
	// sweeping by hand).
	ReplicaTimeout time.Duration
}

// budgetGrace keeps a period's counter after the period ends, so late
// settles still land on it.
const budgetGrace = 24 * time.Hour

// markerTTL is how long a settled marker guards against replays.
const markerTTL = 600

const window = int64(limit.Window / time.Microsecond)

// Limiter is a limit.Admitter on Redis. It is safe for concurrent use.
type Limiter struct {
	c       rueidis.Client
	prefix  string
	now     func() time.Time
	timeout time.Duration
	log     *slog.Logger
	onLost  func(error)
	tries   int
	spend   *limit.SpendLog
	store   limit.SpendStore

	admit, admitBatch, admitAll, settle, seed, sweep, lease script
	// queues holds each tag's admissions waiting to go to Redis together
	// (tag → *tagQueue; admitbatch.go).
	queues sync.Map
	// admitCalls counts the admission script calls, admitBatched the
	// admissions sent in a batch: their ratio is the batches' size.
	admitCalls, admitBatched atomic.Uint64
	// beforeCall, when set (by tests), runs before each admission call
	// with the number of admissions it carries.
	beforeCall func(n int)

	live   *liveness
	ids    atomic.Uint64
	idBase string

	reservationTTL time.Duration
	replicaTimeout time.Duration
	// registered holds when this replica last added a tag to the ledger
	// registry (tag → time.Time), so it does so once in a while, not on
	// every admission.
	registered sync.Map
	// seeding single-flights the rebuild of a tag's counters (tag →
	// *seedCall).
	seeding sync.Map

	qmu    sync.RWMutex
	closed bool
	queue  chan settleJob
	batch  int
	delay  time.Duration
	wait   time.Duration
	// beforeFlush, when set (by tests), runs before each batch goes out.
	beforeFlush func()
	// The settle queue's counters (SettleStats).
	settled, calls, waited, lostN atomic.Uint64
	wg                            sync.WaitGroup
	stopSweep                     chan struct{}
}

type script struct{ src, sha string }

func newScript(src string) script {
	h := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(h[:])}
}

// New builds a Limiter on c, loads its scripts and starts its settle
// workers. It does not fail when Redis is down (scripts are loaded on
// first use then); Close stops it. The caller keeps ownership of c.
func New(ctx context.Context, c rueidis.Client, o Options) (*Limiter, error) {
	l := &Limiter{c: c, prefix: o.Prefix, now: o.Now, timeout: o.Timeout, log: o.Log, onLost: o.OnSettleLost,
		tries: o.SettleAttempts, store: o.Spend, reservationTTL: o.ReservationTTL,
		admit: newScript(admitScript), admitBatch: newScript(admitBatchScript), admitAll: newScript(admitAllScript), settle: newScript(settleScript), seed: newScript(seedScript), sweep: newScript(sweepScript),
		lease: newScript(leaseScript), live: newLiveness()}
	if l.reservationTTL <= 0 {
		l.reservationTTL = DefaultReservationTTL
	}
	if l.prefix == "" {
		l.prefix = "gh:"
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.timeout <= 0 {
		l.timeout = 250 * time.Millisecond
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.tries <= 0 {
		l.tries = 5
	}
	n := o.SettleQueue
	if n <= 0 {
		n = 4096
	}
	var b [6]byte
	rand.Read(b[:])
	l.idBase = hex.EncodeToString(b[:]) + "-"
	if info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString(); err == nil {
		if err := checkVersion(info); err != nil {
			return nil, err
		}
	}
	for _, s := range []script{l.admit, l.admitBatch, l.admitAll, l.settle, l.seed, l.sweep, l.lease} {
		sha, err := c.Do(ctx, c.B().ScriptLoad().Script(s.src).Build()).ToString()
		if err != nil {
			l.log.Warn("redis: script load failed; will load on first use", "err", err)
			break
		}
		if sha != s.sha {
			return nil, fmt.Errorf("redis: script load returned sha %s, want %s", sha, s.sha)
		}
	}
	if o.Spend != nil {
		l.spend = limit.NewSpendLog(o.Spend, o.FlushEvery, l.log)
	}
	l.queue = make(chan settleJob, n)
	l.batch, l.delay = o.SettleBatch, o.SettleDelay
	if l.batch <= 0 {
		l.batch = DefaultSettleBatch
	}
	if l.delay == 0 {
		l.delay = DefaultSettleDelay
	}
	if l.wait = o.SettleWait; l.wait <= 0 {
		l.wait = DefaultSettleWait
	}
	for range 2 {
		l.wg.Add(1)
		go l.settleWorker()
	}
	l.stopSweep = make(chan struct{})
	every := o.SweepEvery
	if every == 0 {
		every = 30 * time.Second
	}
	l.replicaTimeout = o.ReplicaTimeout
	switch {
	case l.replicaTimeout > 0:
	case every > 0:
		l.replicaTimeout = 3 * every
	default:
		l.replicaTimeout = 90 * time.Second
	}
	l.heartbeat(ctx)
	if every > 0 {
		l.wg.Add(1)
		go l.sweeper(every)
	}
	return l, nil
}

// DefaultReservationTTL is Options.ReservationTTL's default.
const DefaultReservationTTL = 15 * time.Minute

// run calls s by SHA, and by source when Redis answers NOSCRIPT (its
// script cache was flushed, or this cluster node never saw the script);
// EVAL caches it again.
func (l *Limiter) run(ctx context.Context, s *script, keys, args []string) rueidis.RedisResult {
	r := l.c.Do(ctx, l.c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if e, ok := rueidis.IsRedisErr(r.Error()); ok && e.IsNoScript() {
		r = l.c.Do(ctx, l.c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	return r
}

// tagOf is the hash tag of a: braces would end the tag early, so they
// are replaced; an empty tag becomes "-" (one slot for all such requests).
func tagOf(a *limit.Admission) string {
	t := a.Tag
	if t == "" {
		return "-"
	}
	if strings.ContainsAny(t, "{}") {
		t = strings.NewReplacer("{", "_", "}", "_").Replace(t)
	}
	return t
}

func (l *Limiter) rateKey(tag, kind string, scope limit.Scope, id string) string {
	return l.prefix + "{" + tag + "}:" + kind + ":" + string(scope) + ":" + id
}

func (l *Limiter) budgetKey(tag string, b *limit.Budget, start string) string {
	return l.prefix + "{" + tag + "}:b:" + string(b.Scope) + ":" + string(b.Period) + ":" + start + ":" + b.ID
}

// The reservation ledger of a tag: a sorted set of open reservations by
// deadline, each entry saying what it counts (ledgerMember). Earlier
// versions kept a ledger of ids under another name, and what each
// counted in a hash beside it: the sweep still reads those two for the
// entries they left, and their own sweep never sees the present
// ledger (which it would empty without releasing anything, finding
// nothing in its hash). The seeded marker says the tag's budget
// counters are in Redis. The registry (one key, no tag) lists the tags
// whose ledgers the sweep visits.
func (l *Limiter) ledgerKey(tag string) string    { return l.prefix + "{" + tag + "}:rl" }
func (l *Limiter) oldLedgerKey(tag string) string { return l.prefix + "{" + tag + "}:r" }
func (l *Limiter) ledgerHash(tag string) string   { return l.prefix + "{" + tag + "}:rh" }
func (l *Limiter) seededKey(tag string) string    { return l.prefix + "{" + tag + "}:seeded" }
func (l *Limiter) registryKey() string            { return l.prefix + "ledgers" }

// ledgerMember is a reservation's entry in its tag's ledger: its id, its
// cost (micro-dollars, as decimal digits) and the keys of its budget
// counters, separated by the unit separator (0x1f), which neither ids
// nor keys hold. Everything a sweep needs to release the reservation
// is in it, and a settle, which knows the three, writes the same string
// to take it out.
func ledgerMember(id, cost string, budgets []string) string {
	n := len(id) + 1 + len(cost)
	for _, k := range budgets {
		n += 1 + len(k)
	}
	b := make([]byte, 0, n)
	b = append(append(append(b, id...), 0x1f), cost...)
	for _, k := range budgets {
		b = append(append(b, 0x1f), k...)
	}
	return string(b)
}

// replicasKey is the sorted set of replicas by their last sign of life:
// the sweep releases only the reservations of replicas gone from it.
func (l *Limiter) replicasKey() string { return l.prefix + "replicas" }

// heartbeat says this replica is alive (its id, the prefix of its
// reservations' ids, scored by now) and forgets replicas silent for a
// day. A failure is only logged: the next sweep tries again.
func (l *Limiter) heartbeat(ctx context.Context) {
	now := l.now()
	cmds := rueidis.Commands{
		l.c.B().Zadd().Key(l.replicasKey()).ScoreMember().ScoreMember(float64(now.UnixMilli()), l.idBase).Build(),
		l.c.B().Zremrangebyscore().Key(l.replicasKey()).Min("-inf").Max(strconv.FormatInt(now.Add(-24*time.Hour).UnixMilli(), 10)).Build(),
	}
	for _, r := range l.c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			l.log.Debug("redis: heartbeat failed", "err", err)
			return
		}
	}
}

// minRedis is the oldest Redis the scripts run on: the settle script
// asks ZMSCORE (Redis 6.2) which of its reservations the ledger holds.
const minRedis = "6.2"

// checkVersion refuses, with what to do about it, a Redis older than
// minRedis, from its INFO server section. A server that does not say
// its version (a proxy) is let through, as is one that does not answer
// at start: admissions then find out.
func checkVersion(info string) error {
	for line := range strings.Lines(info) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:")
		if !ok {
			continue
		}
		major, rest, _ := strings.Cut(v, ".")
		minor, _, _ := strings.Cut(rest, ".")
		ma, err1 := strconv.Atoi(major)
		mi, err2 := strconv.Atoi(minor)
		if err1 == nil && err2 == nil && (ma < 6 || ma == 6 && mi < 2) {
			return fmt.Errorf("redis: the server is Redis %s; cluster mode needs Redis %s or later (its scripts use ZMSCORE): upgrade Redis", v, minRedis)
		}
		return nil
	}
	return nil
}

// ref maps a script key back to the limit it counts.
type ref struct {
	kind  limit.Kind
	src   int // index into Rates or Budgets
	limit int64
	cost  int64
	// inc is how far the request moves a rate bucket (µs; rateMicros),
	// window + 1 for any move past the window (the request is too large).
	inc int64
	end time.Time
}

// Admit implements limit.Admitter in one round trip.
func (l *Limiter) Admit(ctx context.Context, a limit.Admission) (limit.Decision, error) {
	now := l.now()
	c := l.prepare(a, now)
	if len(c.keys) == 0 {
		return limit.Decision{Allowed: true, Reservation: limit.NewReservation(c.id, a, now)}, nil
	}
	if c.nb > 0 {
		// Budgets: the reservation goes into the tag's ledger, which the
		// sweep must know of first.
		if err := l.register(ctx, c.q.tag, now); err != nil {
			return limit.Decision{}, err
		}
	}
	out, err := l.exchange(ctx, c)
	if err != nil {
		return limit.Decision{}, err
	}
	return l.decide(c, out, now)
}

// prepare writes the admission of a at now as admitScript takes it: its
// counters' keys (its shape's), each once, and the arguments.
func (l *Limiter) prepare(a limit.Admission, now time.Time) *admitCall {
	s := l.shapeOf(&a, now)
	refs := slices.Clone(s.refs) // cost and inc are this admission's
	args := make([]string, 7, 7+3*len(refs))
	// The numbers are written into one buffer and cut from one string
	// at the end: one allocation for all of them.
	var nums numArgs
	nowMicros := now.UnixMicro()
	nums.set(args, 0, nowMicros)
	nums.set(args, 1, int64(s.nr))
	nums.set(args, 2, window)
	args[3] = "0"
	nums.set(args, 6, int64(a.Cost))
	for i := range s.nr {
		r := &refs[i]
		r.cost = 1
		if r.kind == limit.KindTokens {
			r.cost = a.Tokens
		}
		inc := rateMicros(r.cost, r.limit)
		r.inc = int64(min(inc, float64(window+1)))
		args = append(args, "", "0", "0")
		nums.setFloat(args, len(args)-3, inc)
		if inc > float64(window) {
			continue // refused whatever the bucket holds: never written
		}
		// The bucket's arrival time and TTL when it is behind now, as
		// the script would work them out in doubles.
		nums.setFloat(args, len(args)-2, float64(nowMicros)+inc)
		nums.setFloat(args, len(args)-1, math.Ceil(inc/1000)+1000)
	}
	for j := range s.nb {
		r := &refs[s.nr+j]
		r.cost = int64(a.Cost)
		args = append(args, "", "")
		nums.set(args, len(args)-2, r.limit-int64(a.Cost))
		nums.set(args, len(args)-1, s.exps[j])
	}
	id := l.newID()
	if s.nb > 0 {
		// The reservation goes into the tag's ledger (with a durable
		// record, after the seeded marker is checked).
		args[3] = "1"
		nums.set(args, 5, now.Add(l.reservationTTL).UnixMilli())
		if l.store != nil {
			args[3] = "2"
		}
	}
	nums.fill(args)
	if s.nb > 0 {
		// The reservation is known by its ledger entry: its settle
		// takes out the very string the admission put in.
		id = ledgerMember(id, args[6], s.budgetKeys())
		args[4] = id
	}
	return &admitCall{keys: s.keys, args: args, refs: refs, q: s.q, nr: s.nr, nb: s.nb, a: a, id: id, at: now}
}

// decide reads admitScript's reply to c.
func (l *Limiter) decide(c *admitCall, out []int64, now time.Time) (limit.Decision, error) {
	a, refs, nr, nb := &c.a, c.refs, c.nr, c.nb
	if want := 3 + nr + nb; len(out) != want {
		return limit.Decision{}, fmt.Errorf("redis: admit: %w: reply of %d values, want %d", limit.ErrUnavailable, len(out), want)
	}

	var d limit.Decision
	for i := range nr {
		used := out[3+i]
		q := limit.Quota{Limit: refs[i].limit, Remaining: rateRemaining(used, refs[i].limit), Reset: time.Duration(used) * time.Microsecond}
		p := &d.Requests
		if refs[i].kind == limit.KindTokens {
			p = &d.Tokens
		}
		if p.Limit == 0 || q.Remaining < p.Remaining || (q.Remaining == p.Remaining && q.Limit < p.Limit) {
			*p = q
		}
	}
	for j, used := range out[3+nr:] {
		d.NoteBudget(refs[nr+j].limit, used)
	}
	if out[0] == 1 {
		d.Allowed = true
		d.Reservation = limit.NewReservation(c.id, *a, now)
		return d, nil
	}
	idx := int(out[1]) - 1
	if idx < 0 || idx >= len(refs) {
		return limit.Decision{}, fmt.Errorf("redis: admit: %w: refused index %d out of range", limit.ErrUnavailable, idx)
	}
	r := refs[idx]
	if r.kind == limit.KindBudget {
		b := a.Budgets[r.src]
		d.Refused = limit.Refusal{Scope: b.Scope, ID: b.ID, Name: b.Name, Kind: limit.KindBudget, Period: b.Period, TooLarge: r.cost > r.limit}
		if !r.end.IsZero() {
			d.RetryAfter = r.end.Sub(now)
		}
	} else {
		rt := a.Rates[r.src]
		d.Refused = limit.Refusal{Scope: rt.Scope, ID: rt.ID, Name: rt.Name, Kind: r.kind, TooLarge: r.cost > r.limit}
		d.RetryAfter = time.Duration(out[2]) * time.Microsecond
	}
	return d, nil
}

// rateMicros is how far units move a rate bucket's arrival time (µs,
// floored) under a limit of limit a window. It is computed in doubles,
// as the scripts did before this moved out of Redis, so the buckets move
// exactly as before.
func rateMicros(units, limit int64) float64 {
	return math.Floor(float64(units) * float64(window) / float64(limit))
}

// rateIncrement is rateMicros as a script argument.
func rateIncrement(units, limit int64) string {
	return string(appendFloat(nil, rateMicros(units, limit)))
}

// appendFloat appends an integral double as Lua reads it back unchanged:
// its digits, below 2^53; past it (only a request too large for its
// limit gets there), the shortest form that is the same double.
func appendFloat(b []byte, f float64) []byte {
	if math.Abs(f) < 1<<53 {
		return strconv.AppendInt(b, int64(f), 10)
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

// numArgs writes a script call's numeric arguments into one buffer, and
// fill cuts them from one string: one allocation for all of them, where
// strconv makes one a number, on every admission. It lives on the
// caller's stack (fixed arrays: a slice grown through a pointer would
// move to the heap); a number that does not fit gets its own string.
type numArgs struct {
	buf      [400]byte
	used, n  int
	at, ends [48]int // each number's index in args and its end in buf
}

// set writes v as args[i].
func (n *numArgs) set(args []string, i int, v int64) {
	if n.n == len(n.at) || n.used+20 > len(n.buf) {
		args[i] = strconv.FormatInt(v, 10)
		return
	}
	n.used += len(strconv.AppendInt(n.buf[n.used:n.used], v, 10))
	n.at[n.n], n.ends[n.n] = i, n.used
	n.n++
}

// setFloat writes f, integral, as args[i] (appendFloat).
func (n *numArgs) setFloat(args []string, i int, f float64) {
	if math.Abs(f) < 1<<53 {
		n.set(args, i, int64(f))
		return
	}
	args[i] = string(appendFloat(nil, f))
}

// fill puts the numbers written into the buffer in their places in args.
func (n *numArgs) fill(args []string) {
	s, from := string(n.buf[:n.used]), 0
	for k, i := range n.at[:n.n] {
		args[i] = s[from:n.ends[k]]
		from = n.ends[k]
	}
}

// rateRemaining is what a rate bucket whose arrival time is used µs
// ahead of now has left, computed in doubles as the script did.
func rateRemaining(used, limit int64) int64 {
	if used >= window {
		return 0
	}
	return int64(math.Floor(float64(window-used) * float64(limit) / float64(window)))
}

// releaseAdmission undoes, through the settle queue, an admission whose
// outcome is unknown: a settle of nothing. If the script reserved, the
// ledger holds the reservation and the settle takes its estimate back;
// if it never ran, the ledger does not, and the settle adds the actual
// cost, zero. The tokens are settled at the estimate, leaving the token
// buckets as they are: a rate bucket's refill soon forgives either way.
//
// Most such failures are an outage, where nothing was reserved and every
// admission fails: the releases then take at most half the settle queue,
// so they never crowd out the settles of real reservations; one not
// queued leaves its estimate counted, on the safe side, until the replica
// is gone and the sweep releases it.
func (l *Limiter) releaseAdmission(id string, a limit.Admission, at time.Time) {
	l.qmu.RLock()
	full := l.closed || len(l.queue) >= cap(l.queue)/2
	l.qmu.RUnlock()
	if full {
		return
	}
	r := limit.NewReservation(id, a, at)
	if job, ok := l.settleJobOf(&r, limit.Actual{Tokens: a.Tokens}); ok {
		// Never waiting: the admission that failed is on the request path.
		_ = l.enqueue(job, false)
	}
}

// admitOnce runs an admission script, waiting for its reply while Redis
// answers (liveness.go). The scripts' {-1}, the tag's counters lost, is
// errCountersLost.
func (l *Limiter) admitOnce(ctx context.Context, s *script, keys, args []string) ([]int64, error) {
	cctx, w := l.live.callContext(ctx, l.timeout)
	out, err := l.run(cctx, s, keys, args).AsIntSlice()
	cause := context.Cause(cctx)
	w.release()
	l.noteReply(err)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("redis: admit: %w", ctx.Err())
		}
		if cause != nil {
			err = cause
		}
		return nil, fmt.Errorf("redis: admit: %w: %w", limit.ErrUnavailable, err)
	}
	if len(out) == 1 && out[0] == -1 {
		return nil, errCountersLost
	}
	return out, nil
}

// noteReply records that Redis answered, when err (of a call) says it did.
func (l *Limiter) noteReply(err error) {
	if _, isReply := rueidis.IsRedisErr(err); err == nil || isReply {
		l.live.heard()
	}
}

// newID names a reservation: unique across replicas (a random base per
// Limiter) and within one (a counter).
func (l *Limiter) newID() string {
	return l.idBase + strconv.FormatUint(l.ids.Add(1), 36)
}

// registerEvery is how often a replica re-adds a tag it admits budgets
// for to the ledger registry; the registry is what the sweep of any
// replica visits, so a crashed replica's reservations are found.
const registerEvery = 10 * time.Minute

// register adds tag to the ledger registry before this replica first
// reserves in its ledger (and every registerEvery after): one extra
// round trip per tag now and then, none on the usual admission.
func (l *Limiter) register(ctx context.Context, tag string, now time.Time) error {
	if t, ok := l.registered.Load(tag); ok && now.Sub(t.(time.Time)) < registerEvery {
		return nil
	}
	cctx, w := l.live.callContext(ctx, l.timeout)
	err := l.c.Do(cctx, l.c.B().Sadd().Key(l.registryKey()).Member(tag).Build()).Error()
	if cause := context.Cause(cctx); err != nil && cause != nil && ctx.Err() == nil {
		err = cause
	}
	w.release()
	l.noteReply(err)
	if err != nil {
		return fmt.Errorf("redis: admit: %w: %w", limit.ErrUnavailable, err)
	}
	l.registered.Store(tag, now)
	return nil
}

// Close stops accepting settles, waits for the queued ones (until ctx
// ends) and flushes the durable spend record. It does not close the
// rueidis client.
func (l *Limiter) Close(ctx context.Context) error {
	l.qmu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
		close(l.stopSweep)
	}
	l.qmu.Unlock()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("redis: close: settles still queued: %w", ctx.Err())
	}
	if l.spend != nil {
		err = errors.Join(err, l.spend.Close(ctx))
	}
	return err
}

// Seed restores budget counters of the current periods that Redis lacks
// (after a flush, a failover to an empty replica, a restart without
// persistence) from the durable record, and returns how many it set.
// Counters Redis still has are left alone unless the record holds more. Call it at start; spend
// reserved between the loss and the Seed is not restored.
func (l *Limiter) Seed(ctx context.Context) (int, error) {
	if l.store == nil {
		return 0, nil
	}
	now := l.now()
	m, err := l.store.LoadSpend(ctx, limit.Since(now))
	if err != nil {
		return 0, fmt.Errorf("redis: seed: %w", err)
	}
	byTag := map[string][2][]string{}
	for k, v := range m {
		start, end := k.Period.Span(now)
		if k.Start != start || v == 0 {
			continue // a past period
		}
		exp := int64(0)
		if !end.IsZero() {
			exp = end.Add(budgetGrace).UnixMilli()
		}
		tag := tagOf(&limit.Admission{Tag: k.Tag})
		b := limit.Budget{Scope: k.Scope, ID: k.ID, Period: k.Period}
		ka := byTag[tag]
		ka[0] = append(ka[0], l.budgetKey(tag, &b, start))
		ka[1] = append(ka[1], strconv.FormatInt(v, 10), strconv.FormatInt(exp, 10))
		byTag[tag] = ka
	}
	total := 0
	for tag, ka := range byTag {
		n, err := l.seedCounters(ctx, tag, ka[0], ka[1])
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// seedCounters sets the counters that are absent, then the tag's seeded
// marker, in one script.
func (l *Limiter) seedCounters(ctx context.Context, tag string, keys, pairs []string) (int, error) {
	keys = append(keys, l.seededKey(tag))
	args := append([]string{strconv.FormatInt(l.now().UnixMilli(), 10)}, pairs...)
	n, err := l.run(ctx, &l.seed, keys, args).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("redis: seed: %w", err)
	}
	return int(n), nil
}

// seedTimeout bounds the durable record's query of a rebuild.
const seedTimeout = 5 * time.Second

// seedCall is one rebuild of a tag's counters, shared by the admissions
// that wait for it.
type seedCall struct {
	done chan struct{}
	err  error
}

// seedTag rebuilds the budget counters of one tag (raw: the admission's
// own tag, as the durable record keys it) from the durable record, then
// sets its seeded marker. Concurrent admissions of the tag share one
// rebuild; the rebuild's own bound is the admission timeout plus the
// record's query.
func (l *Limiter) seedTag(ctx context.Context, tag, raw string) error {
	call := &seedCall{done: make(chan struct{})}
	if prev, loaded := l.seeding.LoadOrStore(tag, call); loaded {
		p := prev.(*seedCall)
		select {
		case <-p.done:
			return p.err
		case <-ctx.Done():
			return fmt.Errorf("redis: admit: %w", ctx.Err())
		}
	}
	defer func() {
		l.seeding.Delete(tag)
		close(call.done)
	}()
	// The rebuild serves every admission of the tag waiting for it, so
	// one client hanging up must not fail the others: it runs on its own
	// bounded deadline, not the request's cancellation.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout+seedTimeout)
	defer cancel()
	now := l.now()
	spend, err := l.tagSpend(ctx, raw, limit.Since(now))
	if err != nil {
		call.err = fmt.Errorf("redis: admit: %w: rebuilding lost counters: %w", limit.ErrUnavailable, err)
		return call.err
	}
	var keys, pairs []string
	for k, v := range spend {
		start, end := k.Period.Span(now)
		if k.Start != start || v == 0 {
			continue
		}
		exp := int64(0)
		if !end.IsZero() {
			exp = end.Add(budgetGrace).UnixMilli()
		}
		b := limit.Budget{Scope: k.Scope, ID: k.ID, Period: k.Period}
		keys = append(keys, l.budgetKey(tag, &b, start))
		pairs = append(pairs, strconv.FormatInt(v, 10), strconv.FormatInt(exp, 10))
	}
	n, err := l.seedCounters(ctx, tag, keys, pairs)
	if err != nil {
		call.err = fmt.Errorf("redis: admit: %w: %w", limit.ErrUnavailable, err)
		return call.err
	}
	l.log.Warn("redis: budget counters were missing; rebuilt from the durable record", "tag", tag, "counters", n)
	return nil
}

// TagSpendLoader is implemented by durable records that can load one
// tag's spend (PostgreSQL, with an index on the tag); others are read
// whole and filtered.
type TagSpendLoader interface {
	LoadTagSpend(ctx context.Context, tag, since string) (map[limit.BudgetKey]int64, error)
}

func (l *Limiter) tagSpend(ctx context.Context, tag, since string) (map[limit.BudgetKey]int64, error) {
	if tl, ok := l.store.(TagSpendLoader); ok {
		return tl.LoadTagSpend(ctx, tag, since)
	}
	all, err := l.store.LoadSpend(ctx, since)
	if err != nil {
		return nil, err
	}
	for k := range all {
		if k.Tag != tag {
			delete(all, k)
		}
	}
	return all, nil
}

// sweepBatch bounds one sweep script call, so no call holds Redis long.
const sweepBatch = 500

// sweeper runs Sweep every interval until Close.
func (l *Limiter) sweeper(every time.Duration) {
	defer l.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stopSweep:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		if _, err := l.Sweep(ctx); err != nil {
			l.log.Warn("redis: sweeping unsettled reservations failed", "err", err)
		}
		cancel()
	}
}

// Sweep releases the budget reservations whose deadline (admission plus
// Options.ReservationTTL) has passed without a settle and whose replica
// has shown no sign of life for Options.ReplicaTimeout — it crashed, or
// lost Redis — in every tag of the ledger registry, and returns how many
// it released. Every replica sweeps; the script makes each release
// happen once.
func (l *Limiter) Sweep(ctx context.Context) (int, error) {
	l.heartbeat(ctx)
	now := l.now()
	live, err := l.c.Do(ctx, l.c.B().Zrangebyscore().Key(l.replicasKey()).
		Min(strconv.FormatInt(now.Add(-l.replicaTimeout).UnixMilli(), 10)).Max("+inf").Build()).AsStrSlice()
	if err != nil {
		return 0, fmt.Errorf("redis: sweep: %w", err)
	}
	tags, err := l.c.Do(ctx, l.c.B().Smembers().Key(l.registryKey()).Build()).AsStrSlice()
	if err != nil {
		return 0, fmt.Errorf("redis: sweep: %w", err)
	}
	total := 0
	for _, tag := range tags {
		for _, ledger := range [...]string{l.ledgerKey(tag), l.oldLedgerKey(tag)} {
			skipped := 0
			for {
				args := append([]string{strconv.FormatInt(now.UnixMilli(), 10), strconv.Itoa(skipped), strconv.Itoa(sweepBatch)}, live...)
				out, err := l.run(ctx, &l.sweep, []string{ledger, l.ledgerHash(tag)}, args).AsIntSlice()
				if err != nil || len(out) != 2 {
					return total, fmt.Errorf("redis: sweep: %w (reply %v)", err, out)
				}
				released, looked := int(out[0]), int(out[1])
				total += released
				skipped += looked - released // a live replica's, kept
				if looked < sweepBatch {
					break
				}
			}
		}
	}
	if total > 0 {
		l.log.Warn("redis: released budget reservations never settled (a replica stopped mid-request?)", "reservations", total)
	}
	return total, nil
}

// Spent reads the counted spend (settled and reserved) of a budget in the
// period containing t, for tests and the admin API.
func (l *Limiter) Spent(ctx context.Context, tag string, b limit.Budget, t time.Time) (limit.Micros, error) {
	start, _ := b.Period.Span(t)
	v, err := l.SpentMany(ctx, []limit.BudgetKey{{Tag: tag, Scope: b.Scope, ID: b.ID, Period: b.Period, Start: start}})
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// SpentMany reads the counted spend (settled and reserved) of several
// budget counters, in order: one pipelined round trip for a whole page of
// the admin API. A key's Start is its period's first day, as
// limit.Period.Span gives it ("" for Total). Each counter is its own GET,
// not one MGET, because counters of different tags live on different
// Redis Cluster slots.
func (l *Limiter) SpentMany(ctx context.Context, keys []limit.BudgetKey) ([]limit.Micros, error) {
	out := make([]limit.Micros, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		b := limit.Budget{Scope: k.Scope, ID: k.ID, Period: k.Period}
		cmds[i] = l.c.B().Get().Key(l.budgetKey(tagOf(&limit.Admission{Tag: k.Tag}), &b, k.Start)).Build()
	}
	for i, r := range l.c.DoMulti(ctx, cmds...) {
		v, err := r.AsInt64()
		if rueidis.IsRedisNil(err) {
			continue // never spent in this period
		}
		if err != nil {
			return nil, fmt.Errorf("redis: spent: %w", err)
		}
		out[i] = limit.Micros(v)
	}
	return out, nil
}

var _ limit.Admitter = (*Limiter)(nil)
