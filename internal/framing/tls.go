package framing

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// ListenTLS is Listen for a listener of TLS connections (tls.NewListener):
// each connection's handshake runs in a goroutine of its own, bounded by
// timeout, before Accept hands it over, so its protocol is known. HTTP/2
// connections are handed over as the *tls.Conn net/http needs for them;
// HTTP/1.1 ones are watched (net/http still sees their TLS state, through
// ConnectionState). A failed handshake closes the connection: Accept never
// waits on a slow client.
func ListenTLS(ln net.Listener, maxHeaderBytes int, timeout time.Duration, tooLarge Refusal) net.Listener {
	l := &tlsListener{Listener: ln, max: maxHeaderBytes, tooLarge: tooLarge, timeout: timeout,
		ready: make(chan net.Conn), failed: make(chan error), done: make(chan struct{})}
	go l.accept()
	return l
}

type tlsListener struct {
	net.Listener
	max      int
	tooLarge Refusal
	timeout  time.Duration

	ready  chan net.Conn // handshaken connections
	failed chan error    // the inner listener's Accept errors
	done   chan struct{} // closed by Close
	once   sync.Once
}

// accept takes connections off the inner listener until it fails for
// good or is closed; it owns the handshake goroutines it starts, which
// end with their handshake.
func (l *tlsListener) accept() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.failed <- err:
			case <-l.done:
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // net/http backs off and calls Accept again
			}
			return
		}
		go l.handshake(c)
	}
}

func (l *tlsListener) handshake(c net.Conn) {
	tc, ok := c.(*tls.Conn)
	if ok {
		ctx, cancel := context.WithCancel(context.Background())
		if l.timeout > 0 {
			cancel()
			ctx, cancel = context.WithTimeout(context.Background(), l.timeout)
		}
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			var re tls.RecordHeaderError
			if errors.As(err, &re) && re.Conn != nil {
				// What net/http says when it does the handshake itself.
				_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			}
			_ = c.Close()
			return
		}
		if tc.ConnectionState().NegotiatedProtocol != "h2" {
			c = &watchedTLS{Conn: watchWith(tc, l.max, l.tooLarge), tls: tc}
		}
	}
	select {
	case l.ready <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.failed:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *tlsListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// watchedTLS is a watched HTTP/1.1 connection over TLS; ConnectionState
// lets net/http fill in Request.TLS.
type watchedTLS struct {
	*Conn
	tls *tls.Conn
}

func (w *watchedTLS) ConnectionState() tls.ConnectionState { return w.tls.ConnectionState() }
