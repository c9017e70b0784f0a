package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
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
// waits until the heap reaches gcHeapFloor or what GOGC=100 would wait
// for, whichever is more. GOGC=100 waits for twice the live heap plus the
// roots the runtime also scales by GOGC (goroutine stacks and globals), so
// the GOGC that puts the goal at the floor is computed with them: without
// them the goal overshot the floor by roots × GOGC (with 20 MiB live and
// 4 MiB of stacks, 73 MiB instead of 64). Once GOGC=100's goal is over
// the floor (more than about 32 MiB live: thousands of open streams)
// nothing changes: GOGC stays 100.
//
// The floor is measured from one collection to the next, and a burst of
// streams opened between two collections does not move it: at 1,000
// streams the whole burst fits under the goal set at idle, no collection
// runs during it, and the shape of the floor as a function of the live
// heap cannot matter (BENCHMARKS.md, "Streams at 1,000: the floor and what
// an open stream holds"). GOGC set in the environment is left alone, and
// a memory limit (GOMEMLIMIT, or the one memlimit.go derives from the
// container's) still makes the collector work harder near it, and the
// floor is never more than half of it.

// gcHeapFloor is the least heap the collector lets grow before a cycle.
const gcHeapFloor = 64 << 20

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

// gcFloor re-tunes GOGC after every collection from the live heap that
// collection found: a sentinel object's finalizer runs once per cycle and
// arms the next. It runs on the runtime's finalizer goroutine; stop ends
// it at the next cycle.
type gcFloor struct {
	floor   uint64
	stopped atomic.Bool
	percent atomic.Int64 // the GOGC last set, for tests and the log
	sample  []metrics.Sample
}

// startGCFloor starts the floor unless GOGC is set in the environment;
// nil when it is.
func startGCFloor(floor uint64) *gcFloor {
	if os.Getenv("GOGC") != "" {
		return nil
	}
	f := &gcFloor{floor: floor, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	f.tune()
	f.arm()
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

func (f *gcFloor) tune() {
	metrics.Read(f.sample)
	live, stacks, globals := uint64Of(f.sample[0]), uint64Of(f.sample[1]), uint64Of(f.sample[2])
	// Under a small memory limit the floor would have the collector
	// start each cycle near the limit: at most half of it.
	floor := f.floor
	if limit := debug.SetMemoryLimit(-1); limit > 0 && uint64(limit)/2 < floor {
		floor = uint64(limit) / 2
	}
	p := gcPercentFor(live, stacks+globals, floor)
	if int64(p) != f.percent.Load() {
		debug.SetGCPercent(p)
		f.percent.Store(int64(p))
	}
}

func uint64Of(s metrics.Sample) uint64 {
	if s.Value.Kind() == metrics.KindUint64 {
		return s.Value.Uint64()
	}
	return 0
}

// stop ends the re-tuning and puts GOGC back to 100; safe on nil.
func (f *gcFloor) stop() {
	if f == nil {
		return
	}
	f.stopped.Store(true)
	debug.SetGCPercent(100)
}
