package route

import (
	"sync"
	"time"
)

// latencyAlpha is the weight of a new sample in the moving average: about
// the last five requests dominate.
const latencyAlpha = 0.3

// latencyStale is how old a deployment's newest sample may be before the
// average stops counting: a deployment nobody has picked for a while
// (because it was slow, or its breaker was open) is then treated as
// unmeasured, and least-latency tries it again.
const latencyStale = 30 * time.Second

// latency is an exponentially weighted moving average of time to first
// byte.
type latency struct {
	mu   sync.Mutex
	avg  time.Duration
	last time.Time
	n    int
}

func (l *latency) add(now time.Time, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 || now.Sub(l.last) > latencyStale {
		l.avg = d
	} else {
		l.avg = time.Duration(latencyAlpha*float64(d) + (1-latencyAlpha)*float64(l.avg))
	}
	l.n++
	l.last = now
}

// inherit takes o's average.
func (l *latency) inherit(o *latency) {
	avg, last, n := o.snapshot()
	l.mu.Lock()
	l.avg, l.last, l.n = avg, last, n
	l.mu.Unlock()
}

func (l *latency) snapshot() (time.Duration, time.Time, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.avg, l.last, l.n
}

// get returns the average, when it was last fed, and whether there is one.
func (l *latency) get() (time.Duration, time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.avg, l.last, l.n > 0
}

// Load is a model server's own report of how busy it is, read from its
// metrics (see MetricsPoller). Fields it does not report are 0.
type Load struct {
	Running float64 // requests being processed now
	Waiting float64 // requests queued behind them
	KVCache float64 // share of the KV cache in use, 0–1
}

// LoadSignal is a deployment's current Load. Selection calls it under the
// pool's pick lock, so it must be cheap and never do I/O: a poller that
// refreshes in the background implements it with an atomic read. ok is
// false when there is no fresh report.
type LoadSignal interface {
	Load() (l Load, ok bool)
}

// StaticLoad is a LoadSignal that always reports the same load; tests
// and benchmarks use it.
type StaticLoad Load

// Load returns l.
func (l StaticLoad) Load() (Load, bool) { return Load(l), true }
