// Package h1 serves HTTP/1.x connections for an http.Handler: gatehouse's
// own connection server, an opt-in alternative to net/http's for the
// HTTP/1.x half of the listener.
//
// It exists for what net/http's server costs a response with many header
// fields: net/http clones the handler's header map when WriteHeader runs,
// sorts the names, checks each one and passes each value through a
// replacer before writing it. Here the map is written as it stands (no
// clone unless the handler touches it between WriteHeader and the first
// byte out, no sort), each value's control bytes turned into spaces.
//
// Requests are read by net/http itself (http.ReadRequest): the framing of
// a request — Content-Length, chunked bodies, the refusals that keep a
// request from being read two ways — is net/http's, never this package's.
// What it adds around ReadRequest is what net/http's server adds: the
// checks of the Host and header fields, Expect: 100-continue, keep-alive
// and Connection: close, the bounded draining of an unread body, the
// background read that cancels a request's context when its client hangs
// up, and the timeouts.
//
// Connections that are not HTTP/1.x (TLS connections that negotiated h2,
// cleartext ones that open with the HTTP/2 preface) are handed over whole
// (Server.HTTP2), the bytes already read replayed.
//
// It imports only the standard library and golang.org/x/net/http/httpguts
// (the field checks net/http itself uses); it knows nothing of gatehouse.
package h1

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.x on the connections it is given. Its fields mean
// what http.Server's fields of the same names mean; set them before Serve.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the wait for a request's header section,
	// from the connection's start or the request's first byte; 0: none.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a kept-alive
	// connection; 0: none.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and header fields (with
	// net/http's 4 KiB of slack); 0: http.DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// ConnContext, if set, derives each connection's context (as
	// http.Server.ConnContext).
	ConnContext func(context.Context, net.Conn) context.Context
	// ErrorLog receives handler panics and the like; nil: the log
	// package's standard logger.
	ErrorLog *log.Logger
	// HTTP2 takes the connections that are not HTTP/1.x: a TLS
	// connection that negotiated h2, and, with H2C set, a cleartext one
	// that opens with the HTTP/2 preface (its bytes read so far
	// replayed). nil: such connections are closed.
	HTTP2 func(net.Conn)
	// H2C looks for the HTTP/2 preface on cleartext connections.
	H2C bool
	// NotePrefix is a field-name prefix (any case) the handler looks for
	// in requests: the engine notes whether a request carried a field
	// of it while it checks the fields anyway, and the handler learns
	// that from RequestNotes instead of walking the header map again,
	// which most requests would walk for nothing. "": none noted.
	NotePrefix string

	mu        sync.Mutex
	listeners map[*net.Listener]struct{}
	conns     map[*conn]struct{}
	shutdown  atomic.Bool
	connWG    sync.WaitGroup
	date      atomic.Pointer[dateLine] // the Date field's value for the current second
}

// Serve accepts connections on ln and serves each in a goroutine of its
// own until ln fails or the server is shut down.
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(&ln, true) {
		return http.ErrServerClosed
	}
	defer s.track(&ln, false)
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.shutdown.Load() {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Out of descriptors and the like: wait, as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("h1: accept error: %v; retrying in %v", err, backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.ServeConn(c)
	}
}

// ServeConn serves c in a goroutine of its own (or hands it to HTTP2).
func (s *Server) ServeConn(c net.Conn) {
	cc := s.newConn(c)
	if cc == nil {
		return
	}
	go cc.serve()
}

func (s *Server) track(ln *net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutdown.Load() {
			return false
		}
		if s.listeners == nil {
			s.listeners = make(map[*net.Listener]struct{})
		}
		s.listeners[ln] = struct{}{}
	} else {
		delete(s.listeners, ln)
	}
	return true
}

// newConn registers c; nil when the server is shutting down (c closed).
func (s *Server) newConn(nc net.Conn) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown.Load() {
		_ = nc.Close()
		return nil
	}
	if s.conns == nil {
		s.conns = make(map[*conn]struct{})
	}
	c := &conn{srv: s, nc: nc, started: time.Now()}
	c.state.Store(stateNew)
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	return c
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.connWG.Done()
}

// Shutdown stops accepting, closes idle connections, and waits for the
// active ones to finish their request (their response says Connection:
// close), or for ctx to end (then its error is returned; Close ends the
// rest).
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdown.Store(true)
	s.closeListeners()
	// Polled, as net/http polls: a connection goes idle on its own
	// goroutine, and closing it is a race only this loop can win.
	wait := time.Millisecond
	for {
		if s.closeIdle(time.Now()) {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.shutdown.Store(true)
	err := s.closeListeners()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	return err
}

func (s *Server) closeListeners() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for ln := range s.listeners {
		if e := (*ln).Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

// newConnGrace is how long a connection that has sent nothing yet is
// spared by Shutdown: its first request may be on its way (net/http's
// figure).
const newConnGrace = 5 * time.Second

// closeIdle closes the connections waiting for a request (at now) and
// reports whether none is left.
func (s *Server) closeIdle(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.CompareAndSwap(stateIdle, stateClosed) ||
			now.Sub(c.started) > newConnGrace && c.state.CompareAndSwap(stateNew, stateClosed) {
			_ = c.nc.Close()
		}
	}
	return len(s.conns) == 0
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

func (s *Server) maxHeaderBytes() int {
	if s.MaxHeaderBytes > 0 {
		return s.MaxHeaderBytes
	}
	return http.DefaultMaxHeaderBytes
}

func (s *Server) idleTimeout() time.Duration { return s.IdleTimeout }
