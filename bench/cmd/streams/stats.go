// This file holds the pure parts of the tool: reading memory figures out
// of /proc/PID/status, counting server-sent events, percentiles, medians
// and the ABBA order. They are unit-tested; everything that starts
// processes or opens sockets is elsewhere.

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// memStatus is what /proc/PID/status says of a process's resident memory.
type memStatus struct {
	rss, hwm uint64 // VmRSS and VmHWM, in bytes
}

// parseStatus reads VmRSS and VmHWM (reported in kB, which the kernel
// means as KiB) from the text of /proc/PID/status.
func parseStatus(text string) (memStatus, error) {
	var m memStatus
	var seen int
	for line := range strings.SplitSeq(text, "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(value)
		if len(f) != 2 || f[1] != "kB" {
			return m, fmt.Errorf("%s: unexpected value %q", name, strings.TrimSpace(value))
		}
		kib, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return m, fmt.Errorf("%s: %w", name, err)
		}
		if name == "VmRSS" {
			m.rss = kib << 10
		} else {
			m.hwm = kib << 10
		}
		seen++
	}
	if seen != 2 {
		return m, errors.New("no VmRSS and VmHWM lines (a kernel thread, or not Linux?)")
	}
	return m, nil
}

// streamResult is what one client saw of one stream.
type streamResult struct {
	ttfe    time.Duration // request written → first data event read
	connect time.Duration // Do called → request written: the dial, the target's accept queue, the write
	events  int           // data events before [DONE]
	done    bool          // the terminal data: [DONE] arrived
	err     string        // why it failed; "" when it did not
}

// readEvents reads a text/event-stream body, calling first when the first
// data event has arrived, and counts data events up to the terminal
// [DONE]. A stream is complete only when [DONE] came and nothing followed
// it but the end of the body.
func readEvents(body io.Reader, first func()) (events int, done bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		if done {
			return events, false, errors.New("data after [DONE]")
		}
		if events == 0 && first != nil {
			first()
		}
		if string(bytes.TrimSpace(data)) == "[DONE]" {
			done = true
			continue
		}
		events++
	}
	return events, done, sc.Err()
}

// percentile returns the q-quantile of sorted by the nearest rank: exact,
// because a millisecond of p99 is one of the goals.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// median of xs (the mean of the middle two for an even count); NaN for
// none. xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// parseCounts parses the -n flag: concurrent stream counts, each ≥ 1.
func parseCounts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-n: %q is not a positive count", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("-n: no counts")
	}
	return out, nil
}

// targetSpec is one -targets item: a kind (plainproxy, full, before …) and
// environment variables added to its process, written kind+KEY=VALUE…
// (full+GOGC=50), so GC settings can be compared in one run.
type targetSpec struct {
	name string // as given, and as the report prints it
	kind string
	env  []string
}

// Target kinds.
const (
	kindPlain  = "plainproxy"
	kindFull   = "full"
	kindBefore = "before"  // full, run by the -before binary
	kindFullH1 = "full-h1" // full on gatehouse's own HTTP/1.x engine (server.http1_engine: gatehouse)
	// kindBeforeH1 is full-h1 run by the -before binary: the engine's own
	// before and after, side by side.
	kindBeforeH1 = "before-h1"
)

// parseTargets parses the -targets flag.
func parseTargets(s string) ([]targetSpec, error) {
	var out []targetSpec
	seen := map[string]bool{}
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		parts := strings.Split(f, "+")
		t := targetSpec{name: f, kind: parts[0]}
		switch t.kind {
		case kindPlain, kindFull, kindBefore, kindFullH1, kindBeforeH1:
		default:
			return nil, fmt.Errorf("-targets: unknown target %q (plainproxy, full, full-h1, before or before-h1, each optionally +KEY=VALUE)", t.kind)
		}
		for _, kv := range parts[1:] {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return nil, fmt.Errorf("-targets: %q: %q is not KEY=VALUE", f, kv)
			}
			t.env = append(t.env, kv)
		}
		if seen[f] {
			return nil, fmt.Errorf("-targets: %q twice", f)
		}
		seen[f] = true
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("-targets: none")
	}
	return out, nil
}
