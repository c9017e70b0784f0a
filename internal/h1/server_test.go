package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"go/build"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// serve starts the engine with h on a loopback port.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if s.ErrorLog == nil {
		s.ErrorLog = quietLog()
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestDisconnectCancelsContext: a client that hangs up while its handler
// runs cancels the request's context, with and without a request body
// (read to its end first), as net/http's background read does.
func TestDisconnectCancelsContext(t *testing.T) {
	for _, raw := range []string{
		"GET /wait HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /wait HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
		"POST /wait HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	} {
		started := make(chan struct{})
		cancelled := make(chan error, 1)
		addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			if r.Method == "POST" && string(b) != "hello" {
				cancelled <- errors.New("body " + string(b))
				return
			}
			close(started)
			<-r.Context().Done()
			cancelled <- r.Context().Err()
		})})
		c := dial(t, addr)
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		<-started
		_ = c.Close()
		if err := <-cancelled; !errors.Is(err, context.Canceled) {
			t.Errorf("%q: context ended with %v, want canceled", raw, err)
		}
	}
}

// TestPipelinedNotCancelled: the next request arriving while a handler
// runs is not a hang-up.
func TestPipelinedNotCancelled(t *testing.T) {
	release := make(chan struct{})
	var n int
	var mu sync.Mutex
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			<-release
		}
		if err := r.Context().Err(); err != nil {
			io.WriteString(w, "cancelled")
			return
		}
		io.WriteString(w, "fine")
	})})
	c := dial(t, addr)
	io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
	io.WriteString(c, "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	close(release)
	out, _ := io.ReadAll(c)
	if got := strings.Count(string(out), "fine"); got != 2 {
		t.Errorf("%d of 2 answered fine: %q", got, out)
	}
}

// TestFlush: a flushed event reaches the client while the handler still
// runs, chunked; the rest and the trailer follow at its end.
func TestFlush(t *testing.T) {
	next := make(chan struct{})
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Trailer", "X-Cost")
		io.WriteString(w, "data: one\n\n")
		rc := http.NewResponseController(w)
		if err := rc.Flush(); err != nil {
			t.Error(err)
		}
		for _, err := range []error{rc.SetReadDeadline(time.Time{}), rc.SetWriteDeadline(time.Time{}), rc.EnableFullDuplex()} {
			if err != nil {
				t.Errorf("ResponseController: %v", err)
			}
		}
		<-next
		io.WriteString(w, "data: two\n\n")
		w.Header().Set("X-Cost", "0.5")
	})})
	c := dial(t, addr)
	io.WriteString(c, "GET /sse HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v, want chunked", resp.TransferEncoding)
	}
	first := make([]byte, len("data: one\n\n"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "data: one\n\n" {
		t.Fatalf("first event %q, %v", first, err)
	}
	close(next)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "data: two\n\n" {
		t.Errorf("rest %q, %v", rest, err)
	}
	if got := resp.Trailer.Get("X-Cost"); got != "0.5" {
		t.Errorf("trailer X-Cost %q, want 0.5", got)
	}
}

// TestShutdown: idle connections are closed at once, an active request
// finishes (told Connection: close), then Shutdown returns.
func TestShutdown(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "done")
	})}
	addr := serve(t, s)

	idle := dial(t, addr)
	io.WriteString(idle, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
	ibr := bufio.NewReader(idle)
	resp, err := http.ReadResponse(ibr, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)

	active := dial(t, addr)
	io.WriteString(active, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	if _, err := ibr.ReadByte(); err != io.EOF {
		t.Errorf("idle connection: %v, want EOF (closed)", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) with a request still running", err)
	default:
	}
	close(release)
	out, _ := io.ReadAll(active)
	if !bytes.Contains(out, []byte("Connection: close\r\n")) || !bytes.HasSuffix(out, []byte("done")) {
		t.Errorf("active request's answer %q, want it whole with Connection: close", out)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("a connection accepted after Shutdown")
	}
}

// TestShutdownDeadline: Shutdown gives up when its context ends, and Close
// ends the request still running.
func TestShutdownDeadline(t *testing.T) {
	entered := make(chan struct{}, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done()
	})}
	addr := serve(t, s)
	c := dial(t, addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v, want the context's error", err)
	}
	_ = s.Close()
	if _, err := io.ReadAll(c); err != nil {
		t.Errorf("after Close: %v", err)
	}
}

// TestPanic: a panicking handler is logged, its request's context
// canceled (what the handler started under it stops), its connection
// closed with no answer, and the server goes on.
func TestPanic(t *testing.T) {
	var logged syncBuffer
	canceled := make(chan error, 1)
	addr := serve(t, &Server{ErrorLog: log.New(&logged, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			go func() {
				<-r.Context().Done()
				canceled <- r.Context().Err()
			}()
			w.Header().Set("X-Half", "1")
			panic("handler bug")
		}
		io.WriteString(w, "ok")
	})})
	c := dial(t, addr)
	io.WriteString(c, "GET /panic HTTP/1.1\r\nHost: x\r\n\r\n")
	if out, _ := io.ReadAll(c); len(out) != 0 {
		t.Errorf("answer %q after a panic, want none", out)
	}
	if !strings.Contains(logged.String(), "handler bug") {
		t.Errorf("log %q, want the panic", logged.String())
	}
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Errorf("the panicking request's context: %v, want canceled", err)
	}
	c2 := dial(t, addr)
	io.WriteString(c2, "GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if out, _ := io.ReadAll(c2); !bytes.HasSuffix(out, []byte("ok")) {
		t.Errorf("after the panic: %q", out)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHeaderTimeouts: a client that does not finish its header section
// within ReadHeaderTimeout, or sends no next request within IdleTimeout,
// is disconnected.
func TestHeaderTimeouts(t *testing.T) {
	addr := serve(t, &Server{ReadHeaderTimeout: 20 * time.Millisecond, IdleTimeout: 20 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })})
	slow := dial(t, addr)
	io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n")
	if out, err := io.ReadAll(slow); err != nil || len(out) != 0 {
		t.Errorf("half a header: %q, %v; want the connection closed with no answer", out, err)
	}
	idle := dial(t, addr)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	out, err := io.ReadAll(idle)
	if err != nil || !bytes.HasSuffix(out, []byte("ok")) {
		t.Errorf("idle: %q, %v; want the answer, then the connection closed", out, err)
	}
}

// TestRequestFields: RemoteAddr, Host, RequestURI and TLS are set as
// net/http sets them, over TLS too; a TLS connection that negotiates h2,
// and a cleartext one opening with the HTTP/2 preface, go to HTTP2.
func TestRequestFields(t *testing.T) {
	cert := selfSigned(t)
	type seen struct {
		remote, host, uri string
		tls               bool
		proto             int
	}
	got := make(chan seen, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RemoteAddr, r.Host, r.RequestURI, r.TLS != nil, r.ProtoMajor}
		io.WriteString(w, "ok")
	})
	handoff := NewHandoff(nil)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: h, Protocols: p, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = hs.Serve(handoff) }()
	t.Cleanup(func() { _ = hs.Close(); _ = handoff.Close() })

	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secure := tls.NewListener(raw, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	s := &Server{Handler: h, HTTP2: handoff.Put, H2C: true, ErrorLog: quietLog()}
	go func() { _ = s.Serve(plain) }()
	go func() { _ = s.Serve(secure) }()
	t.Cleanup(func() { _ = s.Close() })

	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	for _, tc := range []struct {
		name      string
		url       string
		protos    func(*http.Protocols)
		wantTLS   bool
		wantProto int
	}{
		{"http/1.1", "http://" + plain.Addr().String() + "/a?b=c", func(p *http.Protocols) { p.SetHTTP1(true) }, false, 1},
		{"h2c", "http://" + plain.Addr().String() + "/a?b=c", func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }, false, 2},
		{"https http/1.1", "https://" + raw.Addr().String() + "/a?b=c", func(p *http.Protocols) { p.SetHTTP1(true) }, true, 1},
		{"https h2", "https://" + raw.Addr().String() + "/a?b=c", func(p *http.Protocols) { p.SetHTTP2(true) }, true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := new(http.Protocols)
			tc.protos(cp)
			tr := &http.Transport{Protocols: cp, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			r := <-got
			host := strings.TrimPrefix(strings.TrimPrefix(tc.url, "http://"), "https://")
			host, _, _ = strings.Cut(host, "/")
			if string(b) != "ok" || resp.ProtoMajor != tc.wantProto || r.proto != tc.wantProto || r.tls != tc.wantTLS ||
				r.host != host || r.uri != "/a?b=c" || r.remote == "" {
				t.Errorf("answer %q over HTTP/%d; handler saw %+v", b, resp.ProtoMajor, r)
			}
		})
	}
}

// selfSigned is a certificate for localhost, made for the test.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k, Leaf: leaf}
}

// TestShutdownSparesNewConnections: a connection that has sent nothing
// yet is left to bring its first request for newConnGrace; an idle one
// is closed at once.
func TestShutdownSparesNewConnections(t *testing.T) {
	s := &Server{}
	fresh, freshPeer := net.Pipe()
	idle, idlePeer := net.Pipe()
	defer freshPeer.Close()
	defer idlePeer.Close()
	cf, ci := s.newConn(fresh), s.newConn(idle)
	ci.state.Store(stateIdle)
	if s.closeIdle(cf.started.Add(time.Second)) {
		t.Fatal("no connection left, yet one is new")
	}
	if cf.state.Load() != stateNew || ci.state.Load() != stateClosed {
		t.Fatalf("states %d and %d, want the new one spared and the idle one closed", cf.state.Load(), ci.state.Load())
	}
	if _, err := idlePeer.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("idle connection: %v, want closed", err)
	}
	s.closeIdle(cf.started.Add(newConnGrace + time.Second))
	if cf.state.Load() != stateClosed {
		t.Error("a connection silent past the grace was not closed")
	}
}

// TestImports: the engine knows nothing of gatehouse.
func TestImports(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkg.Imports {
		if strings.Contains(p, ".") && p != "golang.org/x/net/http/httpguts" || strings.HasPrefix(p, "gatehouse/") {
			t.Errorf("imports %s: only the standard library and httpguts", p)
		}
	}
}

// TestContinueWhileAnswering: a handler that reads an Expect:
// 100-continue body in one goroutine while it answers in another gets a
// well-formed exchange — a 100 Continue, if any, wholly before the
// response — and no data race (run with -race), as net/http orders the
// two with a lock.
func TestContinueWhileAnswering(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read := make(chan string)
		go func() {
			b, _ := io.ReadAll(r.Body)
			read <- string(b)
		}()
		w.Header()["Content-Type"] = []string{"text/plain"}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "answer")
		if got := <-read; got != "body" {
			t.Errorf("the handler read %q", got)
		}
	})})
	for range 20 {
		c := dial(t, addr)
		io.WriteString(c, "POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody")
		all, err := io.ReadAll(c)
		if err != nil {
			t.Fatal(err)
		}
		rest := strings.TrimPrefix(string(all), "HTTP/1.1 100 Continue\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(rest)), nil)
		if err != nil {
			t.Fatalf("%v in %q", err, all)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(b) != "answer" || strings.Contains(string(b), "100 Continue") {
			t.Fatalf("status %d, body %q, in %q", resp.StatusCode, b, all)
		}
	}
}

// TestStreamHoldsNoBuffers: while a handler streams, with its request
// read, its connection holds no read buffer and, between flushes, no
// write or body buffer; a next request pipelined meanwhile (its first
// byte taken by the background read) is still answered, and one that
// came in with the body (buffered) too.
func TestStreamHoldsNoBuffers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		together  bool // the next request is sent with the first
		wantEmpty bool // no read buffer held while the first streams
	}{
		{"next-while-streaming", false, true},
		{"next-with-the-body", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flushed := make(chan struct{})
			sent := make(chan struct{})
			addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil || r.URL.Path == "/first" && string(b) != "hello" {
					t.Errorf("body %q, %v", b, err)
				}
				if r.URL.Path != "/first" {
					io.WriteString(w, "second")
					return
				}
				c := w.(*response).c
				if got := c.bufr == nil; got != tc.wantEmpty {
					t.Errorf("read buffer released: %v, want %v", got, tc.wantEmpty)
				}
				io.WriteString(w, "data: one\n\n")
				w.(http.Flusher).Flush()
				if c.out.bw != nil || c.body != nil {
					t.Errorf("after a flush the connection holds a write buffer (%v) or a body buffer (%v)", c.out.bw != nil, c.body != nil)
				}
				close(flushed)
				<-sent
				if !tc.together {
					// The background read takes the next request's
					// first byte: wait for it, so that the rest comes
					// through a read buffer taken again.
					for {
						c.r.mu.Lock()
						got := c.r.hasByte
						c.r.mu.Unlock()
						if got {
							break
						}
						runtime.Gosched()
					}
				}
				if err := r.Context().Err(); err != nil {
					t.Errorf("first request's context: %v", err)
				}
				io.WriteString(w, "data: two\n\n")
			})})
			c := dial(t, addr)
			// A lost request would leave ReadAll waiting: a failure, not
			// a hang (no figure is judged by this deadline).
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			first := "POST /first HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
			second := "POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"
			if tc.together {
				io.WriteString(c, first+second)
			} else {
				io.WriteString(c, first)
			}
			<-flushed
			if !tc.together {
				io.WriteString(c, second)
			}
			close(sent)
			out, _ := io.ReadAll(c)
			br := bufio.NewReader(bytes.NewReader(out))
			var bodies []string
			for {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					break
				}
				b, _ := io.ReadAll(resp.Body)
				bodies = append(bodies, string(b))
			}
			if want := []string{"data: one\n\ndata: two\n\n", "second"}; fmt.Sprint(bodies) != fmt.Sprint(want) {
				t.Errorf("bodies %q, want %q", bodies, want)
			}
		})
	}
}
