package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// freeAddr returns a loopback address nothing listens on (a moment ago).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A connect refused once is tried again, and the request succeeds: the
// first dial finds no listener, the retry hook opens one on that port, so
// the second dial is accepted whatever the timing.
func TestDialerRetriesRefusedConnect(t *testing.T) {
	addr := freeAddr(t)
	d := NewDialer()
	d.Backoff = time.Microsecond
	var causes []string
	var srv *http.Server
	d.OnRetry(func(err error) {
		causes = append(causes, DialCause(err))
		if srv != nil {
			return
		}
		ln, lerr := net.Listen("tcp", addr)
		if lerr != nil {
			t.Errorf("listen on %s: %v", addr, lerr)
			return
		}
		srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") })}
		go srv.Serve(ln)
	})
	defer func() {
		if srv != nil {
			srv.Close()
		}
	}()
	c := &http.Client{Transport: NewTransportWith(d)}
	resp, err := c.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("request failed after a refused connect: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "up" {
		t.Fatalf("body %q", body)
	}
	if d.Retried() != 1 || len(causes) != 1 || causes[0] != "refused" {
		t.Fatalf("retried %d times, causes %v; want once, refused", d.Retried(), causes)
	}
}

// Retries are bounded: an upstream that keeps refusing fails after
// 1 + Retries connects with the refusal.
func TestDialerGivesUpAfterRetries(t *testing.T) {
	addr := freeAddr(t)
	d := NewDialer()
	d.Retries, d.Backoff = 3, time.Microsecond
	_, err := d.DialContext(context.Background(), "tcp", addr)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("err = %v, want connection refused", err)
	}
	if d.Retried() != 3 {
		t.Fatalf("retried %d times, want 3", d.Retried())
	}
	// Classified as before: a 502 saying the provider could not be reached.
	if ge := TransportError("p", &net.OpError{Op: "dial", Err: err}); ge.Status != http.StatusBadGateway {
		t.Fatalf("status %d", ge.Status)
	}
}

// A cancelled call stops retrying at once.
func TestDialerStopsWhenCancelled(t *testing.T) {
	addr := freeAddr(t)
	d := NewDialer()
	d.Retries, d.Backoff = 5, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	d.OnRetry(func(error) { cancel() })
	if _, err := d.DialContext(ctx, "tcp", addr); err == nil {
		t.Fatal("dial succeeded")
	}
	if d.Retried() != 1 {
		t.Fatalf("retried %d times, want 1 (then the cancel)", d.Retried())
	}
}

func TestRetryableDial(t *testing.T) {
	wrap := func(e error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", e)}
	}
	for _, tc := range []struct {
		err   error
		retry bool
		cause string
	}{
		{wrap(syscall.ECONNREFUSED), true, "refused"},
		{wrap(syscall.ECONNRESET), true, "reset"},
		{wrap(syscall.EMFILE), true, "descriptors"},
		{wrap(syscall.EADDRNOTAVAIL), true, "ports"},
		{wrap(syscall.ETIMEDOUT), false, "other"},
		{context.DeadlineExceeded, false, "other"},
		{fmt.Errorf("lookup: %w", &net.DNSError{Err: "no such host", IsNotFound: true}), false, "other"},
	} {
		if got := RetryableDial(tc.err); got != tc.retry {
			t.Errorf("RetryableDial(%v) = %t", tc.err, got)
		}
		if got := DialCause(tc.err); got != tc.cause {
			t.Errorf("DialCause(%v) = %q, want %q", tc.err, got, tc.cause)
		}
	}
}
