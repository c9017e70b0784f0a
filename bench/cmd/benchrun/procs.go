// This file reads what the processes under test (started by
// gatehouse/bench/internal/proc) spend: their CPU time and peak memory from
// /proc, and the machine's busy time.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat.
// Linux fixes it at 100 for user space on every architecture Go supports,
// which spares the harness cgo for sysconf(_SC_CLK_TCK).
const clockTicks = 100

// cpuTime is the user plus system CPU time the process has used so far,
// summed over all its threads.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	st, err := parseStat(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return ticks(st.cpu), nil
}

// ticks is n clock ticks as a duration.
func ticks(n uint64) time.Duration { return time.Duration(n) * time.Second / clockTicks }

// stat is what the harness reads of a /proc/PID/stat line.
type stat struct {
	ppid int
	cpu  uint64 // utime+stime, in clock ticks: the process's own, all its threads'
	// reaped is cutime+cstime: the CPU of its children that have exited
	// and that it has waited for, which the kernel adds to the parent when
	// it reaps them (their own reaped children's included).
	reaped uint64
}

// parseStat reads a /proc/PID/stat line. The command name (field 2) is
// in parentheses and may itself hold spaces and parentheses, so fields
// are counted from the last ')'.
func parseStat(line string) (stat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return stat{}, errors.New("no ')' after the command name")
	}
	// After the name: state is field 3, so ppid (4) is at index 1 and
	// utime, stime, cutime, cstime (14–17) at indexes 11–14.
	f := strings.Fields(line[i+1:])
	if len(f) < 15 {
		return stat{}, fmt.Errorf("only %d fields after the command name", len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return stat{}, fmt.Errorf("ppid: %w", err)
	}
	var t [4]uint64
	for j, name := range []string{"utime", "stime", "cutime", "cstime"} {
		if t[j], err = strconv.ParseUint(f[11+j], 10, 64); err != nil {
			return stat{}, fmt.Errorf("%s: %w", name, err)
		}
	}
	return stat{ppid: ppid, cpu: t[0] + t[1], reaped: t[2] + t[3]}, nil
}

// machineBusy is the CPU time the whole machine has spent on anything but
// idling since boot, time stolen by a hypervisor included.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	ticks, err := parseMachineBusy(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/stat: %w", err)
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// parseMachineBusy sums, in clock ticks, the busy columns of the "cpu"
// line of /proc/stat: user nice system idle iowait irq softirq steal
// (guest time is already inside user).
func parseMachineBusy(stat string) (uint64, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("unexpected first line %q", line)
	}
	var busy uint64
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("column %d: %w", i+1, err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, nil
}

// peakRSS is the process's resident-set high-water mark in bytes.
func peakRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmHWM(string(b))
}

// parseVmHWM reads the "VmHWM:  1234 kB" line of /proc/PID/status.
func parseVmHWM(status string) (uint64, error) {
	for line := range strings.SplitSeq(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmHWM line %q", line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmHWM: %w", err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmHWM line")
}

// resetPeakRSS sets the high-water mark back to the current RSS, so the
// next reading is the peak of one run rather than of the process's life.
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// waitIdle waits until the process uses at most 5% of a core, or max
// has passed: asynchronous work left over from one run (usage-log flushes,
// closing idle connections) must not be billed to the next target.
func waitIdle(ctx context.Context, pid int, max time.Duration) {
	const window = 200 * time.Millisecond
	deadline := time.Now().Add(max)
	prev, err := cpuTime(pid)
	for err == nil && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(window)
		var now time.Duration
		if now, err = cpuTime(pid); err == nil {
			if now-prev <= window/20 {
				return
			}
			prev = now
		}
	}
}

// treeCPU is the CPU time used so far by root and every process below it,
// those that have exited included. Summing the live processes alone
// would lose the ticks of any that exits during a run, as PostgreSQL's
// backends do when their connection closes; a reaped child's ticks are in
// its parent's cutime and cstime, so they stay in the sum. What is lost
// is a child reaped in the microseconds between reading its parent and
// reading it, for that one reading.
func treeCPU(root int) (time.Duration, error) {
	n, err := treeTicks("/proc", root)
	return ticks(n), err
}

// treeTicks is treeCPU in clock ticks, from the procfs mounted at dir,
// which tests replace with a fake one. A process is found below root by
// reading each one's parent.
func treeTicks(dir string, root int) (uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	stats := map[int]stat{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		if err != nil {
			continue // it exited since the listing
		}
		if st, err := parseStat(string(b)); err == nil {
			stats[pid] = st
			children[st.ppid] = append(children[st.ppid], pid)
		}
	}
	if _, ok := stats[root]; !ok {
		return 0, fmt.Errorf("no process %d in %s", root, dir)
	}
	var sum uint64
	tree := []int{root}
	for i := 0; i < len(tree); i++ {
		st := stats[tree[i]]
		sum += st.cpu + st.reaped
		tree = append(tree, children[tree[i]]...)
	}
	return sum, nil
}
