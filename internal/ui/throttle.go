package ui

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Failed logins are limited per client address: maxFailures within
// failureWindow, then refused until the window passes. The admin key is
// long and random, so this is not what keeps it safe; it keeps a guessing
// script from filling the log and the store.
const (
	maxFailures   = 10
	failureWindow = time.Minute
	// maxClients bounds the table; past it, windows that ended are swept.
	maxClients = 10000
)

// throttle counts failed logins per client in fixed windows. It lives as
// long as the Handler (a reload starts it afresh, which costs an attacker
// nothing it did not already have: one more window).
type throttle struct {
	mu      sync.Mutex
	clients map[string]*failures
}

type failures struct {
	n     int
	since time.Time // start of the window
}

func newThrottle() *throttle { return &throttle{clients: map[string]*failures{}} }

// wait says how long client must wait before its next try; 0 lets it try.
func (t *throttle) wait(client string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.clients[client]
	if f == nil || now.Sub(f.since) >= failureWindow {
		return 0
	}
	if f.n < maxFailures {
		return 0
	}
	return failureWindow - now.Sub(f.since)
}

// fail counts one failed login of client.
func (t *throttle) fail(client string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.clients[client]
	if f == nil || now.Sub(f.since) >= failureWindow {
		if len(t.clients) >= maxClients {
			t.sweepLocked(now)
		}
		f = &failures{since: now}
		t.clients[client] = f
	}
	f.n++
}

func (t *throttle) sweepLocked(now time.Time) {
	for c, f := range t.clients {
		if now.Sub(f.since) >= failureWindow {
			delete(t.clients, c)
		}
	}
}

// clientAddr is the peer's IP. Forwarding headers are not trusted: they
// are the client's to choose, and would let it pick a fresh address per
// try.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retryAfter is a Retry-After value: whole seconds, rounded up.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}
