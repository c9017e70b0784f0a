package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Go's collector lets the heap grow to twice what is live (GOGC=100)
// before it runs again, whatever memory the container has: a gateway
// holding thousands of streams can be killed for memory it never needed.
// A soft memory limit makes the collector work harder as the heap nears
// it instead. Go sets none by default; gatehouse serve sets one from the
// container's memory limit when GOMEMLIMIT is not set, and leaves GOGC
// as it is (see docs/scaling.md, "Memory and the garbage collector").

// memLimitShare is the part of the container's limit the Go heap may
// use before the collector works harder: the rest is for goroutine
// stacks, the runtime's own memory and what is not Go's (SQLite's page
// cache).
const memLimitShare = 0.9

// cgroup files that hold the container's memory limit: v2, then v1.
const (
	cgroupV2MemoryFile = "/sys/fs/cgroup/memory.max"
	cgroupV1MemoryFile = "/sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// setMemoryLimit applies memoryLimit's answer to the runtime, and says
// what it set ("" when it set nothing), for the start-up log line.
func setMemoryLimit() string {
	var files []string
	for _, path := range [...]string{cgroupV2MemoryFile, cgroupV1MemoryFile} {
		b, err := os.ReadFile(path)
		if err != nil {
			files = append(files, "")
			continue
		}
		files = append(files, string(b))
	}
	limit, ok := memoryLimit(os.Getenv("GOMEMLIMIT"), files)
	if !ok {
		return ""
	}
	debug.SetMemoryLimit(limit)
	return strconv.FormatInt(limit, 10)
}

// memoryLimit derives the soft memory limit from the contents of the
// cgroup files (v2's memory.max, then v1's memory.limit_in_bytes; ""
// for a file that is absent): memLimitShare of the first that holds a
// limit. It sets nothing when GOMEMLIMIT is set (the runtime has read
// it), when no file holds a limit ("max" in v2; v1 reports "no limit" as
// a number near 2^63), or when the limit is too small to leave the share
// meaningful.
func memoryLimit(env string, cgroupFiles []string) (int64, bool) {
	if env != "" {
		return 0, false
	}
	for _, text := range cgroupFiles {
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		if text == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || n <= 0 {
			continue
		}
		// v1 says "unlimited" with a page-aligned value near 2^63; no
		// container has an exbibyte.
		if n >= 1<<60 {
			return 0, false
		}
		if n < 64<<20 {
			return 0, false
		}
		return int64(float64(n) * memLimitShare), true
	}
	return 0, false
}
