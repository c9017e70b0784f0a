package proc

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestListenAddr(t *testing.T) {
	log := "some noise\nmockllm listening on 127.0.0.1:40123\nmore\n"
	if got, ok := listenAddr([]byte(log)); !ok || got != "127.0.0.1:40123" {
		t.Errorf("listenAddr() = %q, %t", got, ok)
	}
	if _, ok := listenAddr([]byte("mockllm listening on")); ok {
		t.Error("listenAddr() found an address in a line without one")
	}
}

// StartWith's options reach the process: its environment, through
// taskset the CPUs it may run on, and through nice its priority;
// WaitLog sees what it printed.
func TestStartWithOptions(t *testing.T) {
	dir := t.TempDir()
	p, err := StartWith(dir, "opts", Options{Env: []string{"BENCH_X=42"}, CPUs: "0", Nice: 7},
		"/bin/sh", "-c", "echo x=$BENCH_X; grep Cpus_allowed_list /proc/self/status; echo nice=$(nice); echo done")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if err := p.WaitLog(context.Background(), "done", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	out := p.Tail(10)
	for _, want := range []string{"x=42", "Cpus_allowed_list:\t0\n", "nice=7\n"} {
		if !strings.Contains(out+"\n", want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A Group sharing another's dir stops only its own processes.
func TestGroupStopKeepsDir(t *testing.T) {
	g, err := NewGroup("proc-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(false, "test")
	sub := &Group{Dir: g.Dir}
	p, err := sub.Start("sleeper", "/bin/sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	sub.Stop()
	if p.Exited() == nil {
		t.Error("the process still runs after Stop")
	}
	if len(sub.Procs()) != 0 {
		t.Errorf("Procs() after Stop = %d, want 0", len(sub.Procs()))
	}
	if _, err := os.Stat(g.Dir); err != nil {
		t.Errorf("the shared dir is gone after Stop: %v", err)
	}
}
