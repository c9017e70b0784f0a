// Package proc runs the processes a benchmark measures: each starts with
// its output in a log file, is known to be ready when it prints its
// address or answers a readiness URL, and is stopped whatever happens
// (Ctrl-C, a failed setup, the harness being killed). The benchmarks run
// real binaries over real sockets, so nothing here knows gatehouse's own
// packages.
package proc

import (
	"bufio"
	"bytes"
	"context"
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

// Proc is one child process whose stdout and stderr go to a file, so that
// per-request log lines cost the process what they would in production
// (a write) without flooding the terminal.
type Proc struct {
	Name   string
	Log    string // path of the output file
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been reaped
	err    error         // Wait's result; read only after exited is closed
}

// Options adjust how a process starts; the zero value runs it as it is,
// with the harness's environment, on any CPU.
type Options struct {
	// Env is added to the harness's environment (KEY=VALUE), e.g.
	// GOMAXPROCS for the layout being measured.
	Env []string
	// CPUs, when set, is a CPU list the process is confined to from its
	// first instruction on: it runs under `taskset -c CPUs`, which then
	// execs it, so its pid is the process's own.
	CPUs string
	// Credential runs the process as another user (PostgreSQL refuses to
	// run as root).
	Credential *syscall.Credential
	// Nice, when not 0, is the process's nice value: it runs under
	// `nice -n Nice`, which then execs it. A negative value needs root
	// (CAP_SYS_NICE); without it nice says so on the process's log and
	// runs it at its own.
	Nice int
}

// Start runs bin with args, its output written to dir/name.log.
func Start(dir, name, bin string, args ...string) (*Proc, error) {
	return StartWith(dir, name, Options{}, bin, args...)
}

// StartWith is Start with options.
func StartWith(dir, name string, o Options, bin string, args ...string) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child holds its own descriptor
	if o.Nice != 0 {
		args = append([]string{"-n", strconv.Itoa(o.Nice), bin}, args...)
		if bin, err = exec.LookPath("nice"); err != nil {
			return nil, fmt.Errorf("start %s at nice %d: %w (nice is in coreutils)", name, o.Nice, err)
		}
	}
	if o.CPUs != "" {
		args = append([]string{"-c", o.CPUs, bin}, args...)
		if bin, err = exec.LookPath("taskset"); err != nil {
			return nil, fmt.Errorf("start %s on CPUs %s: %w (taskset is in util-linux)", name, o.CPUs, err)
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(o.Env) > 0 {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a Ctrl-C at the terminal reaches only the
		// harness, which then stops the children in order.
		Setpgid: true,
		// If the harness is killed outright, the children go with it.
		Pdeathsig:  syscall.SIGKILL,
		Credential: o.Credential,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stop asks the process to shut down and kills it if it has not within a
// few seconds. It is safe to call more than once.
func (p *Proc) Stop() {
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

// Exited reports, without blocking, whether the process has died.
func (p *Proc) Exited() error {
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s exited: %w", p.Name, p.err)
		}
		return fmt.Errorf("%s exited", p.Name)
	default:
		return nil
	}
}

// WaitListening waits for the "NAME listening on ADDR" line that mockllm
// and plainproxy print once their socket is open, and returns ADDR. Letting
// them pick their own port (":0") avoids racing other programs for one.
func (p *Proc) WaitListening(ctx context.Context, timeout time.Duration) (string, error) {
	return poll(ctx, p, timeout, func() (string, bool) {
		b, _ := os.ReadFile(p.Log)
		return listenAddr(b)
	})
}

// WaitLog waits until the process's log holds text, for servers that
// say they are ready only there (redis-server, postgres).
func (p *Proc) WaitLog(ctx context.Context, text string, timeout time.Duration) error {
	_, err := poll(ctx, p, timeout, func() (string, bool) {
		b, _ := os.ReadFile(p.Log)
		return "", bytes.Contains(b, []byte(text))
	})
	return err
}

// WaitReady polls GET url until it answers 200.
func (p *Proc) WaitReady(ctx context.Context, url string, timeout time.Duration) error {
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
func poll(ctx context.Context, p *Proc, timeout time.Duration, check func() (string, bool)) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if v, ok := check(); ok {
			return v, nil
		}
		err := p.Exited()
		if err == nil && time.Now().After(deadline) {
			err = fmt.Errorf("%s not ready after %s", p.Name, timeout)
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return "", fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, p.Log, p.Tail(20))
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

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreePorts returns n distinct loopback addresses that were free a moment
// ago, for programs that must be told their port in a config file.
func FreePorts(n int) ([]string, error) {
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

// Group is the processes of one benchmark run and the temp dir they work
// in (configs, databases, logs). Close stops them, newest first, and
// removes the dir unless asked to keep it. A Group made as
// &Group{Dir: dir} shares another's dir: its Stop ends only its own
// processes, which is how a run restarts part of what it measures.
type Group struct {
	Dir   string
	procs []*Proc
}

// NewGroup makes the run's temp dir, named after prefix.
func NewGroup(prefix string) (*Group, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	return &Group{Dir: dir}, nil
}

// Start starts a process in the group's dir; Close stops it.
func (g *Group) Start(name, bin string, args ...string) (*Proc, error) {
	return g.StartWith(name, Options{}, bin, args...)
}

// StartWith is Start with options.
func (g *Group) StartWith(name string, o Options, bin string, args ...string) (*Proc, error) {
	p, err := StartWith(g.Dir, name, o, bin, args...)
	if err != nil {
		return nil, err
	}
	g.procs = append(g.procs, p)
	return p, nil
}

// Procs returns the started processes in start order.
func (g *Group) Procs() []*Proc { return g.procs }

// Close stops the processes and removes the dir, or says where it was
// kept. It is safe on a nil Group and after a half-done setup.
func (g *Group) Close(keep bool, command string) {
	if g == nil {
		return
	}
	g.Stop()
	if keep {
		fmt.Fprintln(os.Stderr, command+": kept", g.Dir)
		return
	}
	_ = os.RemoveAll(g.Dir)
}

// Stop stops the group's processes, newest first, and forgets them; the
// dir stays. It is safe on a nil Group.
func (g *Group) Stop() {
	if g == nil {
		return
	}
	for i := len(g.procs) - 1; i >= 0; i-- {
		g.procs[i].Stop()
	}
	g.procs = nil
}

// BuildPlainproxy builds the baseline proxy, gatehouse/bench/cmd/plainproxy,
// into dir; it works when the benchmark runs from inside bench/, as the
// Makefile's targets do.
func BuildPlainproxy(dir string) (string, error) {
	bin := filepath.Join(dir, "plainproxy")
	out, err := exec.Command("go", "build", "-o", bin, "gatehouse/bench/cmd/plainproxy").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build plainproxy (run from bench/ or pass -plainproxy): %w\n%s", err, out)
	}
	return bin, nil
}
