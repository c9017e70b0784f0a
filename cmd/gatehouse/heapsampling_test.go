package main

import (
	"runtime"
	"testing"
)

// TestStopHeapSampling: gatehouse serve turns the runtime's heap sampling
// off, and leaves it as GODEBUG's memprofilerate set it.
func TestStopHeapSampling(t *testing.T) {
	before := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = before })

	runtime.MemProfileRate = 512 * 1024
	t.Setenv("GODEBUG", "madvdontneed=1,memprofilerate=1")
	if stopHeapSampling() || runtime.MemProfileRate != 512*1024 {
		t.Fatalf("with GODEBUG memprofilerate set: MemProfileRate %d", runtime.MemProfileRate)
	}
	t.Setenv("GODEBUG", "madvdontneed=1")
	if !stopHeapSampling() || runtime.MemProfileRate != 0 {
		t.Fatalf("MemProfileRate %d after stopHeapSampling, want 0", runtime.MemProfileRate)
	}
}
