package main

import (
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name        string
		live, roots uint64
		want        int
	}{
		{"nothing live yet", 0, 0, 100},
		{"small heap: goal at the floor", 8 * mib, 0, 700}, // 8 + 8 × 7 = 64
		{"smaller: goal at the floor", 16 * mib, 0, 300},   // 16 + 16 × 3 = 64
		{"half the floor: Go's default", 32 * mib, 0, 100}, // 2 × 32 = 64
		{"large heap: Go's default", 400 * mib, 0, 100},    // thousands of streams
		{"tiny heap: capped at 1600 (the runtime's 4 MiB minimum × 16 = the floor)", 1 * mib, 0, 1600},
		// The runtime scales the roots by GOGC too: counted, the goal
		// stays at the floor instead of overshooting it by roots × GOGC.
		{"roots: goal still at the floor", 8 * mib, 8 * mib, 350},                // 8 + 16 × 3.5 = 64
		{"roots: Go's default reaches the floor first", 24 * mib, 16 * mib, 100}, // 2 × 24 + 16 = 64
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := gcPercentFor(tc.live, tc.roots, 64*mib); got != tc.want {
				t.Fatalf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", tc.live/mib, tc.roots/mib, got, tc.want)
			}
		})
	}
}

// Started, the floor sets GOGC from the live heap and sets it again after
// a collection; stopped, GOGC is 100 again. With GOGC in the environment
// it does nothing.
func TestGCFloorTunesAfterCollections(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(100)
	// A floor of 4 GiB is far above any test heap's twice: GOGC goes
	// above 100, and no higher than the cap (4 GiB / 4 MiB × 100). (A
	// collection first, so that the live heap is known.)
	const maxPercent = 102400
	runtime.GC()
	f := startGCFloor(4 << 30)
	if f == nil {
		t.Fatal("no floor started with GOGC unset")
	}
	set := f.percent.Load()
	if set <= 100 || set > maxPercent {
		t.Fatalf("GOGC set to %d at start, want 101 to %d", set, maxPercent)
	}
	if old := debug.SetGCPercent(50); int64(old) != set {
		t.Fatalf("the runtime's GOGC is %d, want the %d set", old, set)
	}
	f.percent.Store(50)
	// The sentinel's finalizer runs after the cycle that found it dead.
	for i := 0; i < 100 && f.percent.Load() == 50; i++ {
		runtime.GC()
	}
	if p := f.percent.Load(); p <= 100 || p > maxPercent {
		t.Fatalf("after collections GOGC is %d, want it set again above 100", p)
	}
	f.stop()
	if old := debug.SetGCPercent(100); old != 100 {
		t.Fatalf("GOGC %d after stop, want 100", old)
	}

	t.Setenv("GOGC", "200")
	if f := startGCFloor(4 << 30); f != nil {
		t.Fatal("a floor started with GOGC set")
	}
}

// Under a memory limit the floor is at most half of it.
func TestGCFloorUnderAMemoryLimit(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(100)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(64 << 20))
	runtime.GC()
	f := startGCFloor(4 << 30)
	defer f.stop()
	// A 32 MiB floor caps GOGC at 800 (32 MiB / 4 MiB × 100), where
	// the 4 GiB floor alone would give 102400.
	if p := f.percent.Load(); p < 100 || p > 800 {
		t.Fatalf("GOGC %d under a 64 MiB limit, want 100 to 800", p)
	}
}

// The stacks the last collection scanned count in the goal: with 68 MiB
// of them, GOGC=100 already waits past a 64 MiB floor, so the floor sets
// Go's default (counting the live heap alone, a few MiB, it would set
// the cap, 1600).
func TestGCFloorCountsScannedStacks(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(100)
	// 700 goroutines parked with 100 KiB of their stacks in use.
	release := make(chan struct{})
	var parked sync.WaitGroup
	for range 700 {
		parked.Add(1)
		go parkOnDeepStack(&parked, release)
	}
	parked.Wait()
	defer close(release)
	runtime.GC()
	f := startGCFloor(64 << 20)
	defer f.stop()
	if p := f.percent.Load(); p != 100 {
		t.Fatalf("GOGC %d with 68 MiB of scanned stacks, want 100", p)
	}
}

//go:noinline
func parkOnDeepStack(parked *sync.WaitGroup, release chan struct{}) {
	var frame [100 << 10]byte // on the stack: it grows to 128 KiB
	frame[len(frame)-1] = 1
	parked.Done()
	<-release
	runtime.KeepAlive(frame[len(frame)-1])
}
