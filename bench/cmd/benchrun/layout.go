// This file places the processes of a run on the machine's CPUs. The
// pinned layout is how issue 16 measured: the proxy under test alone on
// one CPU with GOMAXPROCS=1, and everything that is not under test (the
// harness, which is the load generator, mockllm, Redis, PostgreSQL) on
// another, so the proxy's throughput is what one core of it buys and no
// neighbour steals from it. The unpinned layout lets the scheduler place
// everything, the proxy at GOMAXPROCS=2: how a small server runs it.

package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"gatehouse/bench/internal/proc"
)

// Layout names, as -layout takes them.
const (
	pinned   = "pinned"
	unpinned = "unpinned"
)

// placement is where one layout runs each role.
type placement struct {
	layout string
	proxy  proc.Options // the process under test: plainproxy or a gatehouse
	load   proc.Options // mockllm, redis-server, postgres
	// harnessCPUs is the CPU list the harness confines itself to (its
	// original affinity when unpinned), harnessProcs its GOMAXPROCS (0:
	// the runtime's default).
	harnessCPUs  string
	harnessProcs int
}

// place returns layout's placement on cpus, the CPUs the harness was
// allowed at start. Pinning needs two of them.
func place(layout string, cpus []int) (placement, error) {
	switch layout {
	case pinned:
		if len(cpus) < 2 {
			return placement{}, fmt.Errorf("the pinned layout needs 2 CPUs, the harness may use only %v: use -layout unpinned", cpus)
		}
		proxy, load := strconv.Itoa(cpus[0]), strconv.Itoa(cpus[1])
		one := []string{"GOMAXPROCS=1"}
		return placement{layout: layout,
			proxy:       proc.Options{CPUs: proxy, Env: one},
			load:        proc.Options{CPUs: load, Env: one},
			harnessCPUs: load, harnessProcs: 1}, nil
	case unpinned:
		return placement{layout: layout,
			proxy:       proc.Options{Env: []string{"GOMAXPROCS=2"}},
			harnessCPUs: cpuList(cpus)}, nil
	}
	return placement{}, fmt.Errorf("unknown layout %q", layout)
}

// apply confines the harness, every thread of it, to the placement's
// CPUs; the threads it starts later inherit that.
func (p placement) apply() error {
	if p.harnessCPUs == "" { // no layout of the run pins: leave the affinity alone
		runtime.SetDefaultGOMAXPROCS()
		return nil
	}
	out, err := exec.Command("taskset", "-a", "-p", "-c", p.harnessCPUs, strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p -c %s (pinning the load generator): %w: %s", p.harnessCPUs, err, strings.TrimSpace(string(out)))
	}
	if p.harnessProcs > 0 {
		runtime.GOMAXPROCS(p.harnessProcs)
	} else {
		runtime.SetDefaultGOMAXPROCS()
	}
	return nil
}

// ownCPUs is the CPU list the harness may run on, as taskset reports it.
func ownCPUs() ([]int, error) {
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, fmt.Errorf("taskset not found (it is in util-linux: apt-get install util-linux): %w", err)
	}
	out, err := exec.Command("taskset", "-c", "-p", strconv.Itoa(os.Getpid())).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("taskset -c -p: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return parseAffinity(string(out))
}

// parseAffinity reads taskset's "pid 42's current affinity list: 0-3,5".
func parseAffinity(out string) ([]int, error) {
	_, list, ok := strings.Cut(strings.TrimSpace(out), "affinity list: ")
	if !ok {
		return nil, fmt.Errorf("unexpected taskset output %q", out)
	}
	return parseCPUList(list)
}

// parseCPUList reads a Linux CPU list: "0-3,5".
func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for f := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// cpuList writes cpus as a list taskset reads.
func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}
