// Package framing watches the HTTP/1.x bytes of each accepted connection,
// message by message, to find requests whose length is ambiguous: those
// carrying both Content-Length and Transfer-Encoding. net/http frames such
// a request by Transfer-Encoding and hides the Content-Length from the
// handler, so the handler cannot see what RFC 9112 §6.1 asks to act on: a
// proxy in front may have framed the same bytes by Content-Length and
// meant the rest as a second request (request smuggling), so the server
// must close the connection after answering. With the Listener and
// ConnContext in place, Ambiguous tells the handler which request it is.
//
// It knows nothing of gatehouse: it imports only the standard library.
package framing

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Refusal answers a request whose request line and header fields are
// longer than the limit: it returns the whole HTTP/1.1 response (status
// line, fields and body) for the request target given (as sent, cut at
// 256 bytes; empty when the request line itself was too long). The
// watcher writes it and closes the connection before net/http reads the
// request, since net/http answers such a request in plain text only.
type Refusal func(target string) []byte

// Listen wraps ln so every plain connection it accepts is watched. A
// connection that is a TLS connection is returned as it is: net/http
// needs the *tls.Conn itself to negotiate HTTP/2 (ListenTLS watches
// those). With tooLarge set, a header section over maxHeaderBytes is
// answered by it; nil leaves that to net/http.
func Listen(ln net.Listener, maxHeaderBytes int, tooLarge Refusal) net.Listener {
	return &listener{Listener: ln, max: maxHeaderBytes, tooLarge: tooLarge}
}

type listener struct {
	net.Listener
	max      int
	tooLarge Refusal
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil || isTLS(c) {
		return c, err
	}
	return watchWith(c, l.max, l.tooLarge), nil
}

// headerCap is how long a header section the watcher follows: net/http
// reads MaxHeaderBytes plus 4096 bytes of slack before it gives up with
// 431 and closes the connection, and so does the watcher.
func headerCap(maxHeaderBytes int) int {
	if maxHeaderBytes <= 0 {
		maxHeaderBytes = http.DefaultMaxHeaderBytes
	}
	return maxHeaderBytes + 4096
}

// Conn is a connection whose incoming HTTP/1.x messages are followed as
// net/http reads them.
type Conn struct {
	net.Conn
	mu       sync.Mutex // held while a Read feeds the parser
	p        parser
	first    firstRead // the read-ahead of a cleartext connection's first read (firstread.go)
	tooLarge Refusal

	ambiguous atomic.Int64 // the 1-based number of the ambiguous request; 0 if none
	served    atomic.Int64 // requests handed to Ambiguous so far
}

// Watch wraps c; maxHeaderBytes is the server's MaxHeaderBytes (0 for
// net/http's default).
func Watch(c net.Conn, maxHeaderBytes int) *Conn { return watch(c, headerCap(maxHeaderBytes)) }

// watch wraps c, following header sections of up to limit bytes.
func watch(c net.Conn, limit int) *Conn {
	w := &Conn{Conn: c}
	w.p.max = limit
	return w
}

// watchWith wraps c for a server whose MaxHeaderBytes is maxHeaderBytes;
// with tooLarge set, longer header sections are refused by it.
func watchWith(c net.Conn, maxHeaderBytes int, tooLarge Refusal) *Conn {
	w := watch(c, headerCap(maxHeaderBytes))
	if tooLarge != nil {
		if maxHeaderBytes <= 0 {
			maxHeaderBytes = http.DefaultMaxHeaderBytes
		}
		w.p.limit, w.tooLarge = maxHeaderBytes, tooLarge
	}
	return w
}

// errHeadersTooLarge is what net/http reads from a connection whose
// header section was refused: a read error, on which it closes the
// connection without writing an answer of its own.
var errHeadersTooLarge = &net.OpError{Op: "read", Net: "tcp", Err: errors.New("request header fields too large: refused by the watcher")}

func (c *Conn) Read(b []byte) (int, error) {
	n, err, ok := c.first.read(b, c.Conn)
	if !ok {
		n, err = c.Conn.Read(b)
	}
	if n > 0 {
		c.mu.Lock()
		at := c.p.feed(b[:n])
		refuse := c.p.tooLarge
		var target string
		if refuse {
			c.p.tooLarge = false // answered once; the parser is off from now on
			target = string(c.p.target)
		}
		c.mu.Unlock()
		if at > 0 {
			c.ambiguous.Store(at)
		}
		if refuse {
			_, _ = c.Conn.Write(c.tooLarge(target))
			return 0, errHeadersTooLarge
		}
	}
	return n, err
}

type connKey struct{}

// connValue is what ConnContext puts in a connection's context: the
// watched connection, if it is one, and what the server attached to it
// (AttachingConnContext), found by one look-up.
type connValue struct {
	conn     *Conn // nil: not watched (HTTP/2 over TLS, a connection handed over)
	attached any
}

// ConnContext is for http.Server.ConnContext: it makes the watched
// connection findable from its requests.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if w := watched(c); w != nil {
		return context.WithValue(ctx, connKey{}, &connValue{conn: w})
	}
	return ctx
}

// AttachingConnContext is ConnContext that also attaches to every
// connection, watched or not, a value of its own made by attach, which
// the connection's requests find with Attached: a server's state for
// one connection, found by the look-up that finds the watched
// connection rather than by one more context value, which would make
// every look-up of a value the request's context does not hold walk
// one more step.
func AttachingConnContext(attach func() any) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, &connValue{conn: watched(c), attached: attach()})
	}
}

// Attached is the value AttachingConnContext attached to the connection
// a request's context comes from; nil when there is none.
func Attached(ctx context.Context) any {
	if v, ok := ctx.Value(connKey{}).(*connValue); ok {
		return v.attached
	}
	return nil
}

// watched is c's watched connection; nil when c is not one.
func watched(c net.Conn) *Conn {
	switch w := c.(type) {
	case *Conn:
		return w
	case *watchedTLS:
		return w.Conn
	}
	return nil
}

// Ambiguous reports whether r carried both Content-Length and
// Transfer-Encoding. Call it once for every request, in the order they
// arrive (first thing in the server's outermost handler): requests are
// told apart by their position on the connection, as net/http serves an
// HTTP/1.x connection's requests one after another. For a connection that
// is not watched, or HTTP/2, it is false.
func Ambiguous(r *http.Request) bool {
	if r.ProtoMajor != 1 {
		return false
	}
	v, ok := r.Context().Value(connKey{}).(*connValue)
	if !ok || v.conn == nil {
		return false
	}
	c := v.conn
	n := c.served.Add(1)
	return n == c.ambiguous.Load()
}
