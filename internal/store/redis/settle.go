package redis

// Settlement in batches. Admission is the one round trip a request waits
// for; settling it is a second script call, off the request path. Sent
// one per request, those calls were half of Redis's script calls and
// more than half of its commands, and under load they competed with the
// admissions for Redis's one core and for the client's connections. So
// settles wait in a bounded queue and go out together: every settle the
// queue holds when a flush starts, up to Options.SettleBatch of them, in
// one script call per hash tag (one call in all on a single server),
// after waiting at most Options.SettleDelay for the batch to fill. Redis
// then sees 1 + 1/B script calls a request instead of 2, and per batch
// one settled marker instead of one per request, one read and write per
// token bucket and one INCRBY per budget counter.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/limit"
)

// Defaults of the settle queue's options. DefaultSettleWait is how long
// Settle waits for room in a full queue before it gives the settle up
// (loudly: logged and counted). A full queue means Redis settles more
// slowly than requests arrive; waiting slows the requests to the pace
// Redis keeps, where dropping would lose the settles.
//
// DefaultSettleDelay is 10 ms: at 2 ms, a replica serving 6,000
// requests a second sent a settle call every 2 ms, two script calls in
// five of all it made; at 10 ms Redis's CPU a request fell by a seventh
// and its commands by three tenths (BENCHMARKS.md, "Settles every 10 ms").
// A settle only gives back what its reservation held over the actual
// cost, so holding it 8 ms longer errs on the safe side.
const (
	DefaultSettleBatch = 256
	DefaultSettleDelay = 10 * time.Millisecond
	DefaultSettleWait  = time.Second
)

// settleJob is one reservation's settle, as the batch script takes it.
type settleJob struct {
	tag string // the hash tag of every key below
	// id is the reservation's: with budgets, its ledger entry
	// (ledgerMember), which the settle takes out of the ledger.
	id      string
	tokens  []tokenDelta
	budgets []string // its budget counters' keys
	// Micro-dollars, the same for each of its counters: actual minus
	// estimate (while the ledger holds the reservation), and actual.
	delta, full int64
}

type tokenDelta struct {
	key          string
	limit, delta int64 // delta: actual tokens minus the estimate
}

// SettleStats counts what the settle queue did, for the metrics.
type SettleStats struct {
	Queued  int    // settles waiting now
	Settled uint64 // settles applied in Redis
	Calls   uint64 // script calls that applied them
	Waited  uint64 // Settle calls that found the queue full and waited for room
	Lost    uint64 // settles given up on (each also logged)
}

// SettleStats reads the settle queue's counters.
func (l *Limiter) SettleStats() SettleStats {
	return SettleStats{Queued: len(l.queue), Settled: l.settled.Load(), Calls: l.calls.Load(),
		Waited: l.waited.Load(), Lost: l.lostN.Load()}
}

// Settle implements limit.Admitter. It queues the correction and returns:
// at once while the queue has room; when it is full, after waiting for
// room (up to Options.SettleWait), which paces requests to what Redis settles. It
// fails only when the settle had to be dropped (no room within that
// wait, or the Limiter closed), which the package doc explains.
func (l *Limiter) Settle(_ context.Context, r limit.Reservation, actual limit.Actual) error {
	if !r.Claim() {
		return nil
	}
	job, ok := l.settleJobOf(&r, actual)
	if !ok {
		return nil
	}
	return l.enqueue(job, true)
}

// enqueue puts job on the queue; when it is full, it waits for room (up
// to Options.SettleWait) if wait, else gives up at once.
func (l *Limiter) enqueue(job settleJob, wait bool) error {
	l.qmu.RLock()
	defer l.qmu.RUnlock()
	if l.closed {
		return l.lost(1, errors.New("redis: settle after Close"))
	}
	select {
	case l.queue <- job:
		return nil
	default:
	}
	if !wait {
		return l.lost(1, errors.New("redis: settle queue full"))
	}
	l.waited.Add(1)
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.queue <- job:
		return nil
	case <-t.C:
		return l.lost(1, fmt.Errorf("redis: settle queue full for %v", l.wait))
	}
}

// settleJobOf is what settling r takes in Redis; false when there is
// nothing to correct. It also adds the actual cost to the durable record.
// The counters are its admission's shape's, as they were at r.At.
func (l *Limiter) settleJobOf(r *limit.Reservation, actual limit.Actual) (settleJob, bool) {
	a := &r.Admission
	s := l.shapeOf(a, r.At)
	job := settleJob{tag: s.q.tag, id: r.ID, budgets: s.budgetKeys()}
	if dt := actual.Tokens - a.Tokens; dt != 0 && len(s.tokens) > 0 {
		job.tokens = make([]tokenDelta, len(s.tokens))
		for i, t := range s.tokens {
			job.tokens[i] = tokenDelta{key: t.key, limit: t.limit, delta: dt}
		}
	}
	if l.spend != nil {
		for i := range a.Budgets {
			b := &a.Budgets[i]
			l.spend.Add(limit.BudgetKey{Tag: a.Tag, Scope: b.Scope, ID: b.ID, Period: b.Period, Start: s.starts[i]}, int64(actual.Cost))
		}
	}
	job.delta, job.full = int64(actual.Cost-a.Cost), int64(actual.Cost)
	return job, len(job.tokens)+len(job.budgets) > 0
}

func (l *Limiter) lost(n int, err error) error {
	l.lostN.Add(uint64(n))
	l.log.Error("settle dropped; the reservation stays counted", "err", err, "settles", n)
	if l.onLost != nil {
		for range n {
			l.onLost(err)
		}
	}
	return err
}

// settleWorker takes settles off the queue in batches: the first one
// starts a batch, which goes out when it holds l.batch settles or
// l.delay after it started, whichever comes first, or at once when the
// queue closes.
func (l *Limiter) settleWorker() {
	defer l.wg.Done()
	batch := make([]settleJob, 0, l.batch)
	var timer *time.Timer
	if l.delay > 0 {
		timer = time.NewTimer(l.delay)
		timer.Stop()
	}
	for job := range l.queue {
		batch = append(batch[:0], job)
		l.fill(&batch, timer)
		l.settleAll(batch)
	}
}

// fill adds queued settles to batch until it holds l.batch, the delay
// passes, or the queue closes. Without a delay it takes only what is
// queued already.
func (l *Limiter) fill(batch *[]settleJob, timer *time.Timer) {
	// First what is there already, without touching the timer: under load
	// the batch fills from the queue alone.
	for len(*batch) < l.batch {
		select {
		case j, ok := <-l.queue:
			if !ok {
				return
			}
			*batch = append(*batch, j)
			continue
		default:
		}
		break
	}
	if timer == nil || len(*batch) >= l.batch {
		return
	}
	timer.Reset(l.delay)
	defer timer.Stop()
	for len(*batch) < l.batch {
		select {
		case j, ok := <-l.queue:
			if !ok {
				return
			}
			*batch = append(*batch, j)
		case <-timer.C:
			return
		}
	}
}

// settleCall is one settle script call: the settles of one batch that
// share a hash tag (on Redis Cluster) or all of them (one server).
type settleCall struct {
	keys, args []string
	n          int // settles it carries
}

// settleAll applies a batch of settles: one script call per group (see
// settleCalls), all of them sent as one pipeline; a call that fails
// (Redis unreachable, a timeout, NOSCRIPT after a script flush) is tried
// again alone, with backoff. Each call carries its own settled marker,
// so one that ran although its reply was lost is not applied again.
func (l *Limiter) settleAll(batch []settleJob) {
	if l.beforeFlush != nil {
		l.beforeFlush()
	}
	calls := l.settleCalls(batch)
	cmds := make(rueidis.Commands, len(calls))
	for i, c := range calls {
		cmds[i] = l.c.B().Evalsha().Sha1(l.settle.sha).Numkeys(int64(len(c.keys))).Key(c.keys...).Arg(c.args...).Build()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	res := l.c.DoMulti(ctx, cmds...)
	cancel()
	for i, r := range res {
		l.noteReply(r.Error())
		if r.Error() != nil {
			l.settleOne(calls[i])
			continue
		}
		l.calls.Add(1)
		l.settled.Add(uint64(calls[i].n))
	}
}

// settleOne runs one settle call, retrying with backoff.
func (l *Limiter) settleOne(c settleCall) {
	var err error
	for try := range l.tries {
		if try > 0 {
			time.Sleep(time.Duration(25<<try) * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = l.run(ctx, &l.settle, c.keys, c.args).Error()
		cancel()
		l.noteReply(err)
		if err == nil {
			l.calls.Add(1)
			l.settled.Add(uint64(c.n))
			return
		}
	}
	l.lost(c.n, fmt.Errorf("redis: settle: %w", err))
}

// settleCalls groups a batch into script calls. On Redis Cluster every
// key of one call must hash to one slot, so each hash tag gets its own
// call; a single server (or Sentinel's master) takes the whole batch in
// one. Every key appears once in a call's KEYS, and the token deltas of a
// bucket are summed.
func (l *Limiter) settleCalls(batch []settleJob) []settleCall {
	cluster := l.c.Mode() == rueidis.ClientModeCluster
	var order []string
	groups := map[string][]settleJob{}
	for _, j := range batch {
		g := ""
		if cluster {
			g = j.tag
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], j)
	}
	calls := make([]settleCall, 0, len(order))
	now := strconv.FormatInt(l.now().UnixMicro(), 10)
	for _, g := range order {
		calls = append(calls, l.settleCallOf(groups[g], now))
	}
	return calls
}

// settleCallOf is the script call for jobs, which share a slot. KEYS
// hold each token bucket, budget counter and ledger once; a bucket's
// refunds and charges and a counter's deltas are summed here, so the
// script adds what the caller wrote unless a reservation has left its
// ledger.
func (l *Limiter) settleCallOf(jobs []settleJob, now string) settleCall {
	c := settleCall{keys: []string{l.markerKey(jobs[0].tag, l.newBatchID())}, n: len(jobs)}
	buckets := tokenSums(jobs)
	// Budget counters (1-based positions among them) with their deltas
	// summed, and the ledgers (tags) in the order they first come, with
	// how many of the jobs each holds.
	var counters, ledgers []string
	var sums []int64
	var count []int
	pos := map[string]int{}
	group := map[string]int{}
	for i := range jobs {
		j := &jobs[i]
		if len(j.budgets) == 0 {
			continue
		}
		g, ok := group[j.tag]
		if !ok {
			g = len(ledgers)
			group[j.tag] = g
			ledgers = append(ledgers, j.tag)
			count = append(count, 0)
		}
		count[g]++
		for _, k := range j.budgets {
			p, ok := pos[k]
			if !ok {
				counters = append(counters, k)
				sums = append(sums, 0)
				p = len(counters)
				pos[k] = p
			}
			sums[p-1] += j.delta
		}
	}
	// The jobs with budgets grouped by ledger, each group in batch order.
	next := make([]int, len(ledgers)+1)
	for g := range ledgers {
		next[g+1] = next[g] + count[g]
	}
	order := make([]int, next[len(ledgers)])
	for i := range jobs {
		if len(jobs[i].budgets) > 0 {
			g := group[jobs[i].tag]
			order[next[g]] = i
			next[g]++
		}
	}
	c.keys = slices.Grow(c.keys, len(buckets)+len(counters)+len(ledgers))
	c.args = make([]string, 0, 5+2*len(buckets)+len(counters)+2*len(ledgers)+len(order))
	c.args = append(c.args, now, strconv.Itoa(markerTTL), strconv.Itoa(len(buckets)), strconv.Itoa(len(counters)), strconv.Itoa(len(ledgers)))
	for _, b := range buckets {
		c.keys = append(c.keys, b.key)
		c.args = append(c.args, rateIncrement(b.refund, b.limit), rateIncrement(b.charge, b.limit))
	}
	c.keys = append(c.keys, counters...)
	for _, s := range sums {
		c.args = append(c.args, strconv.FormatInt(s, 10))
	}
	// Per ledger: its reservations' entries, then what each adds to which
	// counters when the ledger no longer holds it, in one argument
	// ("extra,pos,pos;extra,pos…"); those of all ledgers written into one
	// buffer and cut from one string.
	var buf []byte
	ends := make([]int, len(ledgers))
	x := 0
	for g := range ledgers {
		for n, i := range order[x : x+count[g]] {
			if n > 0 {
				buf = append(buf, ';')
			}
			j := &jobs[i]
			buf = strconv.AppendInt(buf, j.full-j.delta, 10)
			for _, k := range j.budgets {
				buf = append(buf, ',')
				buf = strconv.AppendInt(buf, int64(pos[k]), 10)
			}
		}
		ends[g] = len(buf)
		x += count[g]
	}
	all, from := string(buf), 0
	x = 0
	for g, tag := range ledgers {
		c.keys = append(c.keys, l.ledgerKey(tag))
		c.args = append(c.args, strconv.Itoa(count[g]))
		for _, i := range order[x : x+count[g]] {
			c.args = append(c.args, jobs[i].id)
		}
		c.args = append(c.args, all[from:ends[g]])
		from = ends[g]
		x += count[g]
	}
	return c
}

// markerKey is the settled marker of one settle call.
func (l *Limiter) markerKey(tag, batch string) string {
	return l.prefix + "{" + tag + "}:s:" + batch
}

// newBatchID names a settle call, unique like a reservation's id.
func (l *Limiter) newBatchID() string {
	return l.idBase + "s" + strconv.FormatUint(l.ids.Add(1), 36)
}

// tokenBucket is what a batch of settles does to one token bucket: its
// refunds and its charges, each summed over the batch.
type tokenBucket struct {
	key            string
	limit          int64
	refund, charge int64
}

// tokenSums sums the token settles of jobs per bucket, the buckets in the
// order they first come.
func tokenSums(jobs []settleJob) []tokenBucket {
	var buckets []tokenBucket
	at := map[string]int{}
	for _, j := range jobs {
		for _, t := range j.tokens {
			i, ok := at[t.key]
			if !ok {
				i = len(buckets)
				at[t.key] = i
				buckets = append(buckets, tokenBucket{key: t.key, limit: t.limit})
			}
			if t.delta < 0 {
				buckets[i].refund -= t.delta
			} else {
				buckets[i].charge += t.delta
			}
		}
	}
	return buckets
}
