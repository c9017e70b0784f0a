package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// Go's collector starts a cycle when the heap has grown by GOGC percent
// (100) of what the last cycle found live. A gateway's live heap is small
// — a few megabytes of config, caches and connections — while every
// request allocates tens of kilobytes, so at GOGC=100 the collector runs
// every few hundred requests and its marking was a fifth of a bare
// request's instructions (BENCHMARKS.md, "The plain proxy, in
// instructions"). What the collector costs a request goes as 1/GOGC; what
// it saves in memory is only worth having once the heap is large.
//
// So gatehouse serve keeps a floor under the heap goal: the collector
// waits until the heap reaches the floor or what GOGC=100 would wait for
// (twice the live heap, plus the goroutine stacks and globals the runtime
// adds as roots), whichever is more. The floor is a budget of memory spent
// to save collections, and goroutine stacks are charged to it: a burst of
// open streams holds tens of KiB of stack and buffers each for its whole
// life, and with the floor unchanged the heap would grow to it with no
// cycle at all, keeping the burst's garbage and its first stacks
// (BENCHMARKS.md, "Streams at 1,000: the floor steps aside"). Nothing
// collects between the cycles that re-tune GOGC, so a watcher also
// re-tunes when the stacks have grown by floor/16 (about 200 open
// streams) since the last tuning.
// GOGC set in the environment is left alone, and a memory limit
// (GOMEMLIMIT, or the one memlimit.go derives from the container's) still
// makes the collector work harder near it, and the floor is never more
// than half of it.

// gcHeapFloor is the least heap the collector lets grow before a cycle.
const gcHeapFloor = 64 << 20

// gcFloorWatch is how often the floor checks the goroutine stacks for a
// burst between cycles. A burst of 1,000 streams takes about a second to
// open; the check is one read of a runtime metric.
const gcFloorWatch = 250 * time.Millisecond

// gcPercentFor is the GOGC that puts the heap goal at max(2 × live +
// roots, floor) for a live heap of live bytes and roots bytes of stacks
// and globals (the runtime's goal is live + (live + roots) × GOGC/100).
// It never goes below Go's default of 100, and never above floor / 4 MiB
// × 100: the runtime's own minimum goal is 4 MiB scaled by GOGC, which
// must stay under the floor.
func gcPercentFor(live, roots, floor uint64) int {
	const minGoal = 4 << 20 // the runtime's heap minimum at GOGC=100
	maxPercent := int(floor / minGoal * 100)
	if live == 0 || floor <= 2*live+roots {
		return 100
	}
	return max(100, min(maxPercent, int((floor-live)*100/(live+roots))))
}

// floorLeft is the floor less the memory the goroutine stacks hold, none
// when they hold more.
func floorLeft(floor, stacks uint64) uint64 {
	if stacks >= floor {
		return 0
	}
	return floor - stacks
}

// stacksGrew reports whether the stacks have grown enough since the last
// tuning (then) for the floor to be re-tuned before the next cycle.
func stacksGrew(now, then, floor uint64) bool {
	return now > then && now-then >= floor/16
}

// gcFloor re-tunes GOGC after every collection from the live heap that
// collection found: a sentinel object's finalizer runs once per cycle and
// arms the next. It also re-tunes when a watcher finds the stacks grown
// (a burst of streams between cycles). stop ends both.
type gcFloor struct {
	floor   uint64
	stopped atomic.Bool
	done    chan struct{} // closed by stop: ends the watcher
	percent atomic.Int64  // the GOGC last set, for tests and the log

	mu     sync.Mutex // tune runs on the finalizer goroutine and the watcher
	sample []metrics.Sample
	stacks uint64 // the stacks' memory at the last tuning
}

// The runtime metrics tune reads, in f.sample's order.
var gcFloorMetrics = []string{
	"/gc/heap/live:bytes",
	"/gc/scan/stack:bytes",
	"/gc/scan/globals:bytes",
	"/memory/classes/heap/stacks:bytes",
}

// startGCFloor starts the floor unless GOGC is set in the environment;
// nil when it is.
func startGCFloor(floor uint64) *gcFloor {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	f := &gcFloor{floor: floor, done: make(chan struct{})}
	for _, name := range gcFloorMetrics {
		f.sample = append(f.sample, metrics.Sample{Name: name})
	}
	f.tune()
	f.arm()
	go f.watch()
	return f
}

// sentinel is garbage on purpose: its finalizer marks a finished cycle.
type sentinel struct{ _ [16]byte }

func (f *gcFloor) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if f.stopped.Load() {
			return
		}
		f.tune()
		f.arm()
	})
}

// watch re-tunes when the stacks have grown since the last tuning.
func (f *gcFloor) watch() {
	t := time.NewTicker(gcFloorWatch)
	defer t.Stop()
	stacks := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	for {
		select {
		case <-f.done:
			return
		case <-t.C:
		}
		metrics.Read(stacks)
		f.mu.Lock()
		then := f.stacks
		f.mu.Unlock()
		if stacksGrew(uint64Of(stacks[0]), then, f.floor) {
			f.tune()
		}
	}
}

func uint64Of(s metrics.Sample) uint64 {
	if s.Value.Kind() == metrics.KindUint64 {
		return s.Value.Uint64()
	}
	return 0
}

func (f *gcFloor) tune() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Load() {
		return
	}
	metrics.Read(f.sample)
	live, stackScan, globals, stacks := uint64Of(f.sample[0]), uint64Of(f.sample[1]), uint64Of(f.sample[2]), uint64Of(f.sample[3])
	f.stacks = stacks
	// Under a small memory limit the floor would have the collector
	// start each cycle near the limit: at most half of it.
	floor := f.floor
	if limit := debug.SetMemoryLimit(-1); limit > 0 && uint64(limit)/2 < floor {
		floor = uint64(limit) / 2
	}
	p := gcPercentFor(live, stackScan+globals, floorLeft(floor, stacks))
	if int64(p) != f.percent.Load() {
		debug.SetGCPercent(p)
		f.percent.Store(int64(p))
	}
}

// stop ends the re-tuning and puts GOGC back to 100; safe on nil.
func (f *gcFloor) stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped.Swap(true) {
		return
	}
	close(f.done)
	debug.SetGCPercent(100)
}
