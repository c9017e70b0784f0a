package testservers

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisOptions configure a private Redis. The zero value is a server
// without persistence, as scripts/test-services runs it.
type RedisOptions struct {
	// Persist keeps the data across Stop and Start: an append-only file
	// fsynced after every write, so a restart is an outage and not a loss
	// of data (Kill loses nothing either). Without it a restarted server
	// starts empty.
	Persist bool
}

// Redis is a redis-server of one test. Its methods other than Start may
// be called from any goroutine.
type Redis struct {
	bin, dir string
	port     int
	o        RedisOptions

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// StartRedis starts a redis-server on a free loopback port, killed when
// the test ends. A missing redis-server fails the test.
func StartRedis(t testing.TB, o RedisOptions) *Redis {
	t.Helper()
	bin, err := lookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is missing (%v): install it with `%s`", err, install("redis-server"))
	}
	r := &Redis{bin: bin, dir: tempDir(t, "gatehouse-redis-"), port: freePort(t), o: o}
	t.Cleanup(func() { _ = r.Kill() })
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

// Addr is host:port.
func (r *Redis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// URL is the redis:// URL of database 0.
func (r *Redis) URL() string { return "redis://" + r.Addr() + "/0" }

// Start starts the server again on its port (and, with Persist, its
// data), and returns once it answers PING.
func (r *Redis) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return errors.New("redis: already running")
	}
	args := []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--daemonize", "no",
		"--dir", r.dir, "--logfile", filepath.Join(r.dir, "redis.log"), "--save", ""}
	if r.o.Persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command(r.bin, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redis: start: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	err := waitFor(10*time.Second, func() error {
		select {
		case <-done:
			return errors.New("redis-server exited")
		default:
		}
		return ping(r.Addr())
	})
	if err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("redis on %s: %w; its log:\n%s", r.Addr(), err, tail(filepath.Join(r.dir, "redis.log"), 20))
	}
	r.cmd, r.done = cmd, done
	return nil
}

// Stop shuts the server down as an operator would (SIGTERM) and waits
// until it has exited and its port is closed.
func (r *Redis) Stop() error { return r.signal(syscall.SIGTERM) }

// Kill ends the server at once (SIGKILL), as a crash or an OOM kill
// would.
func (r *Redis) Kill() error { return r.signal(syscall.SIGKILL) }

func (r *Redis) signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return nil
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redis: %v: %w", sig, err)
	}
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("redis on %s did not exit within 30s of %v", r.Addr(), sig)
	}
	r.cmd, r.done = nil, nil
	return nil
}

// ping sends PING and wants +PONG: a server still loading its data
// answers -LOADING instead.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}
