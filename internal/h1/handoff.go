package h1

import (
	"net"
	"sync"
)

// Handoff is a net.Listener fed by hand: the connections Server.HTTP2
// gives it (Put) are what its Accept returns, so that net/http's server
// (http.Server.Serve(handoff)) serves the HTTP/2 ones this package does
// not.
type Handoff struct {
	addr  net.Addr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// NewHandoff is a Handoff whose Addr is addr (the real listener's).
func NewHandoff(addr net.Addr) *Handoff {
	return &Handoff{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// Put hands c to the next Accept, waiting for one; after Close it closes
// c instead.
func (h *Handoff) Put(c net.Conn) {
	select {
	case h.conns <- c:
	case <-h.done:
		_ = c.Close()
	}
}

func (h *Handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *Handoff) Close() error {
	h.once.Do(func() { close(h.done) })
	return nil
}

func (h *Handoff) Addr() net.Addr { return h.addr }
