package redis

// Admissions of one tag that arrive while one of its calls is in flight
// go to Redis together, in one call of admitBatchScript. Redis's CPU is
// the bottleneck of cluster mode before gatehouse's is: each script call
// pays a fixed cost (the command, the script's setup, reading every
// counter) of the order of the admission's own work, and on benchrun's
// bench machine Redis shares its core with the load generator. Batching
// pays it once for all the admissions that queued meanwhile.
//
// It costs no latency when Redis keeps up: an admission that finds no
// call of its tag in flight is sent at once, by its own goroutine, in
// admitScript as before. Only those that arrive during a call wait,
// for it to end (a round trip at most) and then for their own batch,
// which a goroutine started for the purpose sends; it sends the next
// batch as soon as a reply comes, while any wait, and then exits. Every
// admission still costs one round trip of its own, and at most one
// script call; under load, much less than one.
//
// Each admission of a batch is still all-or-nothing on its own; a batch
// answers exactly what the same admissions would get one by one, at the
// instant the batch runs (TestAdmitBatchMatchesOneByOne). Below the
// limits, the usual case, the whole batch fits, and admitAllScript
// admits it with no Lua per admission; only a batch with an admission
// that does not fit costs a second call, of admitBatchScript, which
// decides each on its own.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gatehouse/internal/limit"
)

// maxAdmitBatch bounds the admissions of one call: the script's reply
// and arguments grow with it, and so would the wait of the batch's
// first admission for its last.
const maxAdmitBatch = 64

// admitCall is one admission on its way to Redis: its keys and
// arguments as admitScript takes them, and, once answered, the reply.
type admitCall struct {
	keys, args []string
	refs       []ref // what each counter is, to read the reply
	q          *tagQueue
	nr, nb     int
	a          limit.Admission
	id         string // the reservation's: with budgets, its ledger entry (ledgerMember)
	at         time.Time

	out []int64
	err error
	// state is callWaiting until the call is answered (callAnswered) or
	// its request gives up on it (callAbandoned), whichever comes first.
	state atomic.Uint32
	done  chan struct{} // closed once answered; made when queued
}

const (
	callWaiting uint32 = iota
	callAnswered
	callAbandoned
)

// tagQueue holds the admissions of one tag waiting for its call in
// flight to end, and the names of the tag's keys, made once: every
// admission and settle of the tag names the same few keys, and making
// each name anew (a concatenation, an allocation) was a cost of every
// request in cluster mode.
type tagQueue struct {
	mu      sync.Mutex
	busy    bool // a call of the tag is in flight
	pending []*admitCall

	// raw is the admissions' own Tag, tag the tag as keys carry it
	// (tagOf); ledger and seeded are its ledger's key and seeded
	// marker.
	raw, tag, ledger, seeded string
	namesMu                  sync.RWMutex
	names                    map[keyName]string
}

// keyName is what names a rate bucket or budget counter of a tag.
type keyName struct {
	kind      string // "rq", "rt" or "b"
	scope     limit.Scope
	period    limit.Period // budgets: the period and its start
	start, id string
}

// maxKeyNames bounds the names a tag keeps: past it they are dropped
// and made again as needed (a budget's name changes with its period, so
// a tag's names would otherwise only grow).
const maxKeyNames = 4096

// queueOf is the admission queue of a tag (the admission's own Tag, not
// its sanitised form: two tags that sanitise alike are seeded apart).
func (l *Limiter) queueOf(tag string) *tagQueue {
	if q, ok := l.queues.Load(tag); ok {
		return q.(*tagQueue)
	}
	t := tagOf(&limit.Admission{Tag: tag})
	q, _ := l.queues.LoadOrStore(tag, &tagQueue{raw: tag, tag: t, ledger: l.ledgerKey(t), seeded: l.seededKey(t)})
	return q.(*tagQueue)
}

// name returns the key named by n in q's tag, made once.
func (l *Limiter) name(q *tagQueue, n keyName) string {
	q.namesMu.RLock()
	k, ok := q.names[n]
	q.namesMu.RUnlock()
	if ok {
		return k
	}
	if n.kind == "b" {
		k = l.budgetKey(q.tag, &limit.Budget{Scope: n.scope, Period: n.period, ID: n.id}, n.start)
	} else {
		k = l.rateKey(q.tag, n.kind, n.scope, n.id)
	}
	q.namesMu.Lock()
	if q.names == nil || len(q.names) >= maxKeyNames {
		q.names = make(map[keyName]string)
	}
	q.names[n] = k
	q.namesMu.Unlock()
	return k
}

// exchange sends c to Redis, alone or in a batch, and returns its reply
// to admitScript. Whatever the outcome, a reservation it may have left
// in Redis that nobody will settle is released.
func (l *Limiter) exchange(ctx context.Context, c *admitCall) ([]int64, error) {
	q := c.q
	q.mu.Lock()
	if q.busy {
		c.done = make(chan struct{})
		q.pending = append(q.pending, c)
		q.mu.Unlock()
		return l.await(ctx, c)
	}
	q.busy = true
	q.mu.Unlock()

	if l.beforeCall != nil {
		l.beforeCall(1)
	}
	var out []int64
	err := l.seeded(ctx, q, func() (err error) {
		out, err = l.admitOnce(ctx, &l.admit, c.keys, c.args)
		return err
	})
	l.admitCalls.Add(1)
	if err != nil && c.nb > 0 {
		// The script may have run and reserved with its reply lost (a
		// timeout, a dropped connection): undo it, if it did.
		l.releaseAdmission(c.id, c.a, c.at)
	}

	q.mu.Lock()
	if len(q.pending) == 0 {
		q.busy = false
		q.mu.Unlock()
	} else {
		q.mu.Unlock()
		go l.drain(q)
	}
	return out, err
}

// await waits for a queued call's reply, or for its request to end.
func (l *Limiter) await(ctx context.Context, c *admitCall) ([]int64, error) {
	select {
	case <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(callWaiting, callAbandoned) {
			// The batch's sender releases what it reserved, if anything.
			return nil, fmt.Errorf("redis: admit: %w", ctx.Err())
		}
		<-c.done
	}
	if c.err != nil && c.nb > 0 {
		l.releaseAdmission(c.id, c.a, c.at)
	}
	return c.out, c.err
}

// drain sends the queued admissions of q, a batch a call, until none
// wait, then marks the tag idle.
func (l *Limiter) drain(q *tagQueue) {
	var batch []*admitCall
	for {
		q.mu.Lock()
		// The batch is copied out and the queue keeps its array: no
		// allocation a batch once the queue has grown to its size.
		n := min(len(q.pending), maxAdmitBatch)
		batch = batch[:0]
		for _, c := range q.pending[:n] {
			if c.state.Load() != callAbandoned {
				batch = append(batch, c) // a request gone before it went out costs nothing
			}
		}
		rest := copy(q.pending, q.pending[n:])
		clear(q.pending[rest:])
		q.pending = q.pending[:rest]
		if len(batch) == 0 && rest == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		if len(batch) > 0 {
			l.sendBatch(q, batch)
		}
	}
}

// sendBatch runs one call for batch and answers each of its admissions.
// The call has no request's cancellation (it serves many), only the
// liveness bound every admission has.
func (l *Limiter) sendBatch(q *tagQueue, batch []*admitCall) {
	ctx := context.Background()
	if l.beforeCall != nil {
		l.beforeCall(len(batch))
	}
	var outs [][]int64
	err := l.seeded(ctx, q, func() (err error) {
		if len(batch) == 1 {
			var out []int64
			out, err = l.admitOnce(ctx, &l.admit, batch[0].keys, batch[0].args)
			outs = [][]int64{out}
			return err
		}
		outs, err = l.batchReplies(ctx, batch)
		return err
	})
	l.admitCalls.Add(1)
	l.admitBatched.Add(uint64(len(batch)))
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.out = outs[i]
		}
		if !c.state.CompareAndSwap(callWaiting, callAnswered) {
			// Its request is gone: what the call reserved for it would
			// never be settled.
			if c.nb > 0 && (err != nil || c.out[0] == 1) {
				l.releaseAdmission(c.id, c.a, c.at)
			}
		}
		close(c.done)
	}
}

// seeded runs call, and when it finds the tag's counters lost
// (errCountersLost), rebuilds them from the durable record and runs it
// again.
func (l *Limiter) seeded(ctx context.Context, q *tagQueue, call func() error) error {
	err := call()
	if errors.Is(err, errCountersLost) {
		// Redis lost the tag's counters (a restart without persistence,
		// a failover to an empty replica, a flush): rebuild them from
		// the durable record before admitting anything against them.
		if err = l.seedTag(ctx, q.tag, q.raw); err == nil {
			err = call()
		}
	}
	return err
}

// ledgerOf is a batch's ledger mode (admitScript's ARGV 4) and the keys
// that follow its counters: those of its admission with the highest
// mode (with budgets, the ledger; with a durable record, the seeded
// marker before it).
func ledgerOf(batch []*admitCall) (mode string, tail []string) {
	mode = "0"
	for _, c := range batch {
		if m := c.args[3]; m > mode {
			mode, tail = m, c.keys[c.nr+c.nb:]
		}
	}
	return mode, tail
}

// batchArgs writes the admissions of batch as admitBatchScript takes
// them, from the keys and arguments each has for admitScript.
func batchArgs(batch []*admitCall, now int64) (keys, args []string) {
	index := make(map[string]string, 8) // counter key → its 1-based index, as an argument
	args = make([]string, 4, 4+len(batch)*12)
	for _, c := range batch {
		counters := c.nr + c.nb
		for _, k := range c.keys[:counters] {
			if _, ok := index[k]; !ok {
				keys = append(keys, k)
				index[k] = strconv.Itoa(len(keys))
			}
		}
		member := "" // admitScript's ledger entry, when it has one
		if c.args[3] != "0" {
			member = c.args[4]
		}
		args = append(args, strconv.Itoa(c.nr), strconv.Itoa(c.nb), member, c.args[5], c.args[6])
		for i := range c.nr {
			args = append(args, index[c.keys[i]], c.args[7+3*i])
		}
		for j := range c.nb {
			a := 7 + 3*c.nr + 2*j
			args = append(args, index[c.keys[c.nr+j]], c.args[a], c.args[a+1])
		}
	}
	mode, tail := ledgerOf(batch)
	args[0] = strconv.FormatInt(now, 10)
	args[1] = strconv.FormatInt(window, 10)
	args[2] = strconv.Itoa(len(keys))
	args[3] = mode
	return append(keys, tail...), args
}

// errCountersLost is a batch's answer when Redis lost the tag's
// counters (the seeded marker is missing).
var errCountersLost = errors.New("redis: admit: the tag's counters are lost")

// batchReplies runs a batch of two or more admissions and returns each
// one's reply as admitScript gives it: in one call of admitAllScript
// when all of them fit, and otherwise, after it, in one of
// admitBatchScript. It returns errCountersLost when the tag's seeded
// marker is missing.
func (l *Limiter) batchReplies(ctx context.Context, batch []*admitCall) ([][]int64, error) {
	now := l.now().UnixMicro()
	if f, ok := fitAllArgs(batch, now); ok {
		out, err := l.admitOnce(ctx, &l.admitAll, f.keys, f.args)
		if err != nil {
			return nil, err
		}
		if len(out) != 1 || out[0] != 0 {
			return f.replies(out, batch)
		}
		// Some admission does not fit: each is decided on its own.
	}
	keys, args := batchArgs(batch, now)
	out, err := l.admitOnce(ctx, &l.admitBatch, keys, args)
	if err != nil {
		return nil, err
	}
	return splitReplies(out, batch)
}

// fitAll is a batch written for admitAllScript, with what reading its
// reply takes.
type fitAll struct {
	keys, args []string
	counters   int // the keys that are counters, before the marker and the ledger
	// Per admission, per counter of it (rates, then budgets, as its
	// keys): the counter's index among the batch's.
	index [][]int
}

// adds is what admission c adds to its j-th counter: a rate bucket's
// increment, a budget's cost.
func (c *admitCall) adds(j int) int64 {
	if r := &c.refs[j]; r.kind != limit.KindBudget {
		return r.inc
	}
	return int64(c.a.Cost)
}

// fitAllArgs writes batch for admitAllScript at now (µs); false when a
// request is too large for one of its rate limits (admitBatchScript
// refuses it).
func fitAllArgs(batch []*admitCall, now int64) (f fitAll, ok bool) {
	type counter struct {
		rate         bool
		total, bound int64
		exp          string
	}
	var counters []counter
	at := make(map[string]int, 8)
	var zadd []string
	f.index = make([][]int, len(batch))
	for i, c := range batch {
		n := c.nr + c.nb
		f.index[i] = make([]int, n)
		for j, key := range c.keys[:n] {
			k, seen := at[key]
			if !seen {
				k = len(counters)
				at[key] = k
				counters = append(counters, counter{rate: j < c.nr, bound: math.MaxInt64})
				f.keys = append(f.keys, key)
			}
			cn, r := &counters[k], &c.refs[j]
			if j < c.nr {
				if r.inc > window {
					return f, false
				}
			} else {
				// This admission fits when the spend before the batch
				// and what the admissions before it add is within its
				// threshold.
				cn.bound = min(cn.bound, r.limit-r.cost-cn.total)
				cn.exp = c.args[7+3*c.nr+2*(j-c.nr)+1]
			}
			cn.total += c.adds(j)
			f.index[i][j] = k
		}
		if c.args[3] != "0" {
			zadd = append(zadd, c.args[5], c.args[4])
		}
	}
	mode, tail := ledgerOf(batch)
	f.args = make([]string, 0, 4+4*len(counters)+len(zadd))
	f.args = append(f.args, strconv.FormatInt(now, 10), strconv.Itoa(len(counters)), mode)
	for _, cn := range counters {
		if cn.rate {
			f.args = append(f.args, "r", strconv.FormatInt(now+window-cn.total, 10), strconv.FormatInt(cn.total, 10), "0")
		} else {
			f.args = append(f.args, "b", strconv.FormatInt(cn.bound, 10), strconv.FormatInt(cn.total, 10), cn.exp)
		}
	}
	f.args = append(f.args, strconv.Itoa(len(zadd)/2))
	f.args = append(f.args, zadd...)
	f.counters = len(counters)
	f.keys = append(f.keys, tail...)
	return f, true
}

// replies works out, from admitAllScript's reply (each counter's value
// before the batch), each admission's reply as admitScript gives it:
// admitted, and each counter after it and the admissions before it.
func (f *fitAll) replies(out []int64, batch []*admitCall) ([][]int64, error) {
	base := out[1:]
	if out[0] != 2 || len(base) != f.counters {
		return nil, fmt.Errorf("redis: admit: %w: batch reply of %d values", limit.ErrUnavailable, len(out))
	}
	sums := make([]int64, len(base))
	outs := make([][]int64, len(batch))
	for i := range batch {
		o := make([]int64, 3+len(f.index[i]))
		o[0] = 1
		for j, k := range f.index[i] {
			sums[k] += batch[i].adds(j)
			o[3+j] = base[k] + sums[k]
		}
		outs[i] = o
	}
	return outs, nil
}

// splitReplies cuts a batch's reply into its admissions' replies.
func splitReplies(out []int64, batch []*admitCall) ([][]int64, error) {
	outs := make([][]int64, len(batch))
	for i, c := range batch {
		n := 3 + c.nr + c.nb
		if len(out) < n {
			return nil, fmt.Errorf("redis: admit: %w: batch reply too short", limit.ErrUnavailable)
		}
		outs[i], out = out[:n:n], out[n:]
	}
	if len(out) != 0 {
		return nil, fmt.Errorf("redis: admit: %w: batch reply of %d values too many", limit.ErrUnavailable, len(out))
	}
	return outs, nil
}

// AdmitStats counts the admission script calls and, among the
// admissions, those that waited for their tag's call in flight and went
// in a later call with the others that waited: under load, their ratio
// to the calls is the batches' size.
type AdmitStats struct {
	Calls, Queued uint64
}

// AdmitStats reads the admission counters.
func (l *Limiter) AdmitStats() AdmitStats {
	return AdmitStats{Calls: l.admitCalls.Load(), Queued: l.admitBatched.Load()}
}
