// This file reads what the processes under test (started by
// gatehouse/bench/internal/proc) spend: their CPU time and peak memory from
// /proc, and the machine's busy time.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	ticks, err := parseStatCPU(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// parseStatCPU returns utime+stime, in clock ticks, from a /proc/PID/stat
// line. The command name (field 2) is in parentheses and may itself hold
// spaces and parentheses, so fields are counted from the last ')'.
func parseStatCPU(line string) (uint64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	// After the name: state is field 3, so utime (14) and stime (15) are
	// at indexes 11 and 12.
	f := strings.Fields(line[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("only %d fields after the command name", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return utime + stime, nil
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

// family is root and every process below it, found by reading each
// process's parent from /proc.
func family(root int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // it exited since the listing
		}
		if ppid, err := parseStatPPID(string(b)); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out, nil
}

// parseStatPPID returns the parent pid (field 4) of a /proc/PID/stat line.
func parseStatPPID(line string) (int, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(line[i+1:])
	if len(f) < 2 {
		return 0, errors.New("no parent pid")
	}
	return strconv.Atoi(f[1])
}
