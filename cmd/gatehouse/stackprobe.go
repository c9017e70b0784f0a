//go:build stackprobe

package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	_ "unsafe" // go:linkname
)

// This file is only in a binary built with -tags stackprobe (and
// -ldflags=-checklinkname=0, which lets it reach into the runtime): the
// stack-margin tests build one to see every goroutine's stack size, which
// no public runtime API reports (MemStats.StackInuse counts the runtime's
// 32 KiB spans, whose fill varies by several KiB a goroutine from run to
// run). Never in a release: it depends on the runtime's internals.

// runtimeG is the head of the runtime's goroutine descriptor: its first
// field is the stack's bounds, [lo, hi) (an offset the runtime's assembly
// and cgo rely on, so it does not move).
type runtimeG struct{ lo, hi uintptr }

// forEachG calls fn for every goroutine the runtime has made, running,
// waiting or dead (a dead one holds a stack of the starting size, or none).
//
//go:linkname forEachG runtime.forEachG
func forEachG(fn func(gp *runtimeG))

// startStackProbe serves, when GATEHOUSE_STACKPROBE_LISTEN names an
// address, the count of goroutines by stack size as "size count" lines
// (and at /heap what the heap holds after two collections: "bytes
// objects"; at /heapprofile a heap profile after them, which has every
// allocation with GODEBUG=memprofilerate=1), and says where on stderr.
func startStackProbe() {
	addr := os.Getenv("GATEHOUSE_STACKPROBE_LISTEN")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stack probe: %v\n", err)
		return
	}
	fmt.Fprintf(os.Stderr, "stack probe listening on %s\n", ln.Addr())
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/heapprofile" {
				// Three: a heap profile is as of the collection before
				// the last (runtime.MemProfile).
				runtime.GC()
				runtime.GC()
				runtime.GC()
				_ = pprof.Lookup("heap").WriteTo(w, 0)
				return
			}
			if r.URL.Path == "/heap" {
				// Two collections: the first moves the pools' contents
				// to their victim caches, the second frees them, so what
				// is left is what something holds.
				runtime.GC()
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				fmt.Fprintf(w, "%d %d\n", m.HeapAlloc, m.HeapObjects)
				return
			}
			counts := map[uintptr]int{}
			forEachG(func(gp *runtimeG) { counts[gp.hi-gp.lo]++ })
			sizes := make([]uintptr, 0, len(counts))
			for s := range counts {
				sizes = append(sizes, s)
			}
			sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
			for _, s := range sizes {
				fmt.Fprintf(w, "%d %d\n", s, counts[s])
			}
		}))
	}()
}
