// Package redistest starts a private redis-server for a test that reads
// server-wide statistics (INFO commandstats): on the shared test server,
// other packages' tests running at the same moment would be counted too.
// It also starts a private Sentinel setup, and finds the Redis Cluster
// that scripts/test-services starts.
//
// It is used only from tests, and needs the redis-server and redis-cli
// binaries that scripts/test-services installs.
package redistest

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Start runs a redis-server on a free loopback port, without persistence,
// stopped when the test ends, and returns its URL. A missing binary fails
// the test.
func Start(t testing.TB) string {
	t.Helper()
	return "redis://" + serve(t, "") + "/0"
}

// serve runs a redis-server on a free loopback port, without persistence,
// with the config file conf (unless "") and the extra arguments given,
// stopped when the test ends, and returns its host:port once it answers
// PING.
func serve(t testing.TB, conf string, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (%v): run `make test`, or scripts/test-services start, which install it", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var args []string
	if conf != "" {
		args = append(args, conf) // redis-server reads a config file only as its first argument
	}
	args = append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", t.TempDir())
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			buf := make([]byte, 7)
			_ = c.SetReadDeadline(time.Now().Add(time.Second))
			n, _ := c.Read(buf)
			c.Close()
			if string(buf[:n]) == "+PONG\r\n" {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer within 10s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
