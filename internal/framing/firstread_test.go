package framing

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// lateConn is a client connection as a server on a busy machine sees it:
// the whole request is waiting in the socket, and the read-header
// deadline passes right after the server's first read, so every later
// read fails with a timeout (as a socket read past its deadline does,
// whatever it has buffered).
type lateConn struct {
	net.Conn // nil: only what the server calls is implemented
	request  []byte
	reads    int

	mu      sync.Mutex
	written bytes.Buffer
	closed  chan struct{}
	once    sync.Once
}

func newLateConn(request string) *lateConn {
	return &lateConn{request: []byte(request), closed: make(chan struct{})}
}

func (c *lateConn) Read(b []byte) (int, error) {
	c.reads++
	if c.reads > 1 {
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(b, c.request)
	c.request = c.request[n:]
	return n, nil
}

func (c *lateConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written.Write(b)
}

func (c *lateConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *lateConn) reply() string {
	<-c.closed
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written.String()
}

func (c *lateConn) LocalAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }
func (c *lateConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000}
}
func (c *lateConn) SetDeadline(t time.Time) error      { return nil }
func (c *lateConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *lateConn) SetWriteDeadline(t time.Time) error { return nil }

// oneConnListener accepts c once, then blocks until closed.
type oneConnListener struct {
	c    chan net.Conn
	done chan struct{}
	once sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.c:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }

// TestCleartextHTTP2PeekDoesNotSplitTheRequestLine: with cleartext HTTP/2
// on, a request that arrived whole before the read-header deadline is
// served, as it is with HTTP/1 alone, instead of answered 400 from the
// 14 bytes net/http's preface check read.
func TestCleartextHTTP2PeekDoesNotSplitTheRequestLine(t *testing.T) {
	const request = "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}"
	for _, h2c := range []bool{true, false} {
		t.Run(map[bool]string{true: "h2c", false: "http1 only"}[h2c], func(t *testing.T) {
			p := new(http.Protocols)
			p.SetHTTP1(true)
			p.SetUnencryptedHTTP2(h2c)
			var got string
			srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				got = r.Method + " " + r.URL.Path + " " + string(b)
				_, _ = io.WriteString(w, "served")
			})}
			ln := &oneConnListener{c: make(chan net.Conn, 1), done: make(chan struct{})}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(Listen(ln, 0, nil)) }()
			c := newLateConn(request)
			ln.c <- c
			reply := c.reply()
			if err := srv.Close(); err != nil {
				t.Fatal(err)
			}
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Fatal(err)
			}
			if !strings.HasPrefix(reply, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(reply, "served") {
				t.Fatalf("reply %q, want 200 and the handler's body", reply)
			}
			if got != "POST /v1/chat/completions {}" {
				t.Fatalf("handler saw %q", got)
			}
		})
	}
}

// scriptedConn answers each Read with the next of its chunks, then err.
type scriptedConn struct {
	net.Conn
	chunks []string
	err    error
	sizes  []int // the length of every b it was asked to fill
}

func (c *scriptedConn) Read(b []byte) (int, error) {
	c.sizes = append(c.sizes, len(b))
	if len(c.chunks) == 0 {
		return 0, c.err
	}
	n := copy(b, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func TestFirstReadHandsOutWhatItReadAheadInOrder(t *testing.T) {
	tests := []struct {
		name      string
		first     int // the first read's length
		then      int // every later read's length
		wantSizes []int
	}{
		// The preface peek: one socket read of aheadSize, then the
		// rest from the buffer, then the socket again.
		{"a short first read reads ahead", 14, 5, []int{aheadSize, 5}},
		// net/http's ordinary first read (no cleartext HTTP/2): no
		// read-ahead at all.
		{"a long first read goes to the socket", 4096, 4096, []int{4096, 4096, 4096}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := &scriptedConn{chunks: []string{smuggled, "tail"}, err: io.EOF}
			c := Watch(sc, 0)
			var got []byte
			buf := make([]byte, max(tt.first, tt.then))
			size := tt.first
			for {
				n, err := c.Read(buf[:size])
				got = append(got, buf[:n]...)
				if err != nil {
					if err != io.EOF {
						t.Fatal(err)
					}
					break
				}
				size = tt.then
			}
			if string(got) != smuggled+"tail" {
				t.Fatalf("read %q, want %q", got, smuggled+"tail")
			}
			// The socket is asked once for the read-ahead, once for
			// "tail" and once more for EOF (sizes beyond the first two
			// depend only on tt.then).
			if sc.sizes[0] != tt.wantSizes[0] || len(sc.sizes) < 2 || sc.sizes[1] != tt.wantSizes[1] {
				t.Fatalf("socket reads %v, want them to start %v", sc.sizes, tt.wantSizes)
			}
			if c.ambiguous.Load() != 1 {
				t.Fatalf("ambiguous request %d, want 1: the parser must see the bytes read ahead", c.ambiguous.Load())
			}
		})
	}
}

// The error of the read ahead comes after the bytes read with it.
func TestFirstReadKeepsTheErrorForAfterItsBytes(t *testing.T) {
	c := Watch(&errWithData{data: "GET / HTTP/1.1\r\n", err: io.ErrUnexpectedEOF}, 0)
	buf := make([]byte, 14)
	n, err := c.Read(buf)
	if n != 14 || err != nil {
		t.Fatalf("first read %d, %v; want 14 bytes and no error", n, err)
	}
	n, err = c.Read(buf)
	if string(buf[:n]) != "\r\n" || err != io.ErrUnexpectedEOF {
		t.Fatalf("second read %q, %v; want the last 2 bytes with the error", buf[:n], err)
	}
}

// errWithData returns its data and its error from the same Read.
type errWithData struct {
	net.Conn
	data string
	err  error
}

func (c *errWithData) Read(b []byte) (int, error) {
	n := copy(b, c.data)
	c.data = c.data[n:]
	return n, c.err
}

// A client speaking HTTP/2 with prior knowledge still gets HTTP/2 through
// the read-ahead: the server's preface check reads it from the buffer.
func TestCleartextHTTP2StillServedAfterTheReadAhead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	})}
	go func() { _ = srv.Serve(Listen(ln, 0, nil)) }()
	defer srv.Close()
	cp := new(http.Protocols)
	cp.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: cp}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "HTTP/2.0" {
		t.Fatalf("served as %q, want HTTP/2.0", b)
	}
}

// The first read of a real TCP connection waits for the client's bytes
// (before it takes a buffer) and then reads them all ahead.
func TestFirstReadWaitsForTheClientOnTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := Watch(sc, 0)
	defer c.Close()
	const request = "GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n"
	type result struct {
		first, rest string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		b := make([]byte, 14)
		n, err := c.Read(b) // whether this starts before the write or after, it must get the start
		r.first = string(b[:n])
		if err != nil {
			r.err = err
			done <- r
			return
		}
		// The rest must come from the read-ahead: the client writes
		// nothing more, and a read of the socket would block.
		rest := make([]byte, 64)
		n, r.err = c.Read(rest)
		r.rest = string(rest[:n])
		done <- r
	}()
	if _, err := io.WriteString(client, request); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.first+r.rest != request || len(r.first) != 14 {
		t.Fatalf("reads %q then %q, want 14 bytes then the rest of %q", r.first, r.rest, request)
	}
}
