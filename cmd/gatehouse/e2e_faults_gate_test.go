package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// An enormous non-streamed answer must be refused without the gateway
// holding it. The faulty upstream of the matrix shows that without a
// clock: a request whose prompt carries gateMark has its answer's body
// held at a gate once gateAt bytes are written, until the gateway hangs
// up. A gateway that needed
// more of the body before answering would never answer. unsizedMark
// also drops the answer's Content-Length, so the body comes chunked and
// the bound must be found by reading.

const (
	gateMark    = "[gate]"
	unsizedMark = "[unsized]"
)

// gateResult is what one gated answer's body did.
type gateResult struct {
	declared int64 // the body's whole length, as the mock announced it
	sent     int64 // bytes written before the connection refused more
	held     bool  // the writer reached the gate
}

// gatedUpstream wraps a mock whose gated answers stop at the gate.
type gatedUpstream struct {
	*upstream
	gateAt int64

	mu       sync.Mutex
	release  chan struct{} // closed to open the gate of the current row
	inFlight int           // gated answers whose handler has not ended
	results  []gateResult  // of the ended ones, since the last check
	ended    chan struct{} // signalled when a gated handler ends
}

func startGatedUpstream(t *testing.T, o mockllm.Options, gateAt int64) *gatedUpstream {
	t.Helper()
	o.APIKey = upstreamKey
	m := mockllm.New(o)
	g := &gatedUpstream{gateAt: gateAt, release: make(chan struct{}), ended: make(chan struct{}, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		if !bytes.Contains(b, []byte(gateMark)) {
			m.ServeHTTP(w, r)
			return
		}
		g.mu.Lock()
		release := g.release
		g.inFlight++
		g.mu.Unlock()
		gw := &gateWriter{ResponseWriter: w, gateAt: gateAt, release: release, done: r.Context().Done(),
			unsized: bytes.Contains(b, []byte(unsizedMark)), declared: -1}
		m.ServeHTTP(gw, r)
		g.mu.Lock()
		g.inFlight--
		g.results = append(g.results, gateResult{declared: gw.declared, sent: gw.sent, held: gw.held})
		g.mu.Unlock()
		select {
		case g.ended <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(g.open)
	g.upstream = &upstream{mock: m, URL: srv.URL}
	return g
}

// open lets the current gated answer go on, and arms a new gate for the
// next.
func (g *gatedUpstream) open() {
	g.mu.Lock()
	close(g.release)
	g.release = make(chan struct{})
	g.mu.Unlock()
}

// gateWriter passes gateAt bytes of the body and then waits for release
// (or the gateway to hang up) before writing more.
type gateWriter struct {
	http.ResponseWriter
	gateAt   int64
	release  <-chan struct{}
	done     <-chan struct{}
	unsized  bool
	declared int64
	sent     int64
	held     bool
}

func (w *gateWriter) WriteHeader(status int) {
	h := w.Header()
	if n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil {
		w.declared = n
	}
	if w.unsized {
		h.Del("Content-Length")
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *gateWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if !w.held && w.sent >= w.gateAt {
			w.held = true
			if f, ok := w.ResponseWriter.(http.Flusher); ok {
				f.Flush()
			}
			select {
			case <-w.release:
			case <-w.done:
			}
		}
		chunk := p
		if !w.held {
			chunk = p[:min(int64(len(p)), w.gateAt-w.sent)]
		}
		n, err := w.ResponseWriter.Write(chunk)
		w.sent += int64(n)
		written += n
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// Unwrap lets http.ResponseController reach the connection (the mock's
// reset fault hijacks it).
func (w *gateWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush keeps the mock's streams working through the wrapper.
func (w *gateWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// check holds a gated row's upstream to what the client's answer
// proves: the body was larger than the gate, so the gateway answered
// before the whole of it was sent, having read at most gateAt bytes.
// attempts is how many calls the faulty upstream should have had.
//
// The gate stays shut until every gated handler has seen the gateway
// hang up: opening it as soon as the client has its answer would race
// the transport's closing of the upstream connection (Body.Close
// returns before the socket is closed), and a loopback socket's buffers
// take a whole 4 MB body, so the upstream would count it all as sent.
// A gateway that answers but keeps the connection open fails here.
func (g *gatedUpstream) check(t *testing.T, limit int64, attempts int) {
	t.Helper()
	if !g.waitEnded(30 * time.Second) { // a bound on a hang-up, not a timing
		t.Errorf("a gated answer's connection was still open 30 s after the gateway answered")
		g.open()
		if !g.waitEnded(time.Minute) {
			t.Fatal("a gated answer's handler never ended")
		}
	}
	g.mu.Lock()
	results := g.results
	g.results = nil
	g.mu.Unlock()
	if len(results) != attempts {
		t.Errorf("%d gated answers, want %d", len(results), attempts)
	}
	for _, r := range results {
		g.checkOne(t, r, limit)
	}
}

// waitEnded waits up to d for every gated handler to end, and says
// whether they did.
func (g *gatedUpstream) waitEnded(d time.Duration) bool {
	deadline := time.After(d)
	for {
		g.mu.Lock()
		n := g.inFlight
		g.mu.Unlock()
		if n == 0 {
			return true
		}
		select {
		case <-g.ended:
		case <-deadline:
			return false
		}
	}
}

func (g *gatedUpstream) checkOne(t *testing.T, r gateResult, limit int64) {
	t.Helper()
	if r.declared <= g.gateAt || r.declared <= limit {
		t.Fatalf("the upstream's body was %d bytes: not larger than the gate (%d) and the bound (%d), so it proves nothing",
			r.declared, g.gateAt, limit)
	}
	if r.sent >= r.declared {
		t.Errorf("the upstream sent its whole body (%d bytes): the gateway read it all", r.sent)
	}
}
