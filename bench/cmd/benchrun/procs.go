// This file owns the processes under test: starting them with their output
// in a log file, knowing when they are ready, stopping every one of them
// whatever happens, and reading their CPU time and peak memory from /proc.
// The harness measures real binaries over real sockets, so everything here
// is about processes, never about gatehouse's own packages.

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat.
// Linux fixes it at 100 for user space on every architecture Go supports,
// which spares the harness cgo for sysconf(_SC_CLK_TCK).
const clockTicks = 100

// proc is one child process whose stdout and stderr go to a file, so that
// per-request log lines cost the process what they would in production
// (a write) without flooding the terminal.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string        // path of the output file
	exited chan struct{} // closed once the process has been reaped
	err    error         // Wait's result; read only after exited is closed
}

// startProc runs bin with args, its output appended to dir/name.log.
func startProc(dir, name, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a Ctrl-C at the terminal reaches only the
		// harness, which then stops the children in order.
		Setpgid: true,
		// If the harness is killed outright, the children go with it.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks the process to shut down and kills it if it has not within a
// few seconds. It is safe to call more than once.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// exitedErr reports, without blocking, whether the process has died.
func (p *proc) exitedErr() error {
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s exited: %w", p.name, p.err)
		}
		return fmt.Errorf("%s exited", p.name)
	default:
		return nil
	}
}

// waitListening waits for the "NAME listening on ADDR" line that mockllm
// and plainproxy print once their socket is open, and returns ADDR. Letting
// them pick their own port (":0") avoids racing other programs for one.
func (p *proc) waitListening(ctx context.Context, timeout time.Duration) (string, error) {
	return poll(ctx, p, timeout, func() (string, bool) {
		b, _ := os.ReadFile(p.log)
		return listenAddr(b)
	})
}

// waitReady polls GET url until it answers 200.
func (p *proc) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	_, err := poll(ctx, p, timeout, func() (string, bool) {
		resp, err := c.Get(url)
		if err != nil {
			return "", false
		}
		resp.Body.Close()
		return "", resp.StatusCode == http.StatusOK
	})
	return err
}

// poll calls check every 50 ms until it succeeds, the process dies, the
// timeout passes or ctx ends; failures carry the tail of the process's log.
func poll(ctx context.Context, p *proc, timeout time.Duration, check func() (string, bool)) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if v, ok := check(); ok {
			return v, nil
		}
		err := p.exitedErr()
		if err == nil && time.Now().After(deadline) {
			err = fmt.Errorf("%s not ready after %s", p.name, timeout)
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return "", fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, p.log, p.tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listenAddr finds ADDR in the first "... listening on ADDR" line of b.
func listenAddr(b []byte) (string, bool) {
	const marker = " listening on "
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if _, after, ok := strings.Cut(line, marker); ok {
			if f := strings.Fields(after); len(f) > 0 {
				return f[0], true
			}
		}
	}
	return "", false
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct loopback addresses that were free a moment
// ago, for programs that must be told their port in a config file.
func freePorts(n int) ([]string, error) {
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// Held open until all are picked, so the kernel hands out n distinct ports.
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

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
