package main

import (
	"os"
	"runtime"
	"strings"
)

// The runtime samples allocations for heap profiles: on average one in
// every 512 KiB allocated has its stack walked and recorded. gatehouse
// serves no heap profile (its one profile is --cpuprofile's, of the CPU),
// so that work buys nothing; at a request's allocation rate it cost the
// request-path benchmark 1,200–2,600 instructions a request
// (BENCHMARKS.md, "Heap-profile sampling off in gatehouse serve").

// stopHeapSampling turns the sampling off for gatehouse serve, unless
// GODEBUG sets memprofilerate (someone reading heap profiles through a
// debugger or a build of their own); it reports whether it did.
func stopHeapSampling() bool {
	if strings.Contains(os.Getenv("GODEBUG"), "memprofilerate=") {
		return false
	}
	runtime.MemProfileRate = 0
	return true
}
