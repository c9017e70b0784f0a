package server

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/h1"
)

// deadlineWriter records the read deadlines set through a
// ResponseController.
type deadlineWriter struct {
	http.ResponseWriter
	set []time.Time
}

func (w *deadlineWriter) SetReadDeadline(t time.Time) error {
	w.set = append(w.set, t)
	return nil
}

// oneByOne hands its bytes over one Read at a time, the last with io.EOF
// (as net/http's body of known length does).
type oneByOne struct{ parts []string }

func (r *oneByOne) Read(p []byte) (int, error) {
	n := copy(p, r.parts[0])
	r.parts = r.parts[1:]
	if len(r.parts) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// The guard's body deadline: set when the body is wrapped, moved before
// every read but the first (the guard's own is a moment old), lifted at
// the end.
func TestSlowBodyDeadlines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []string
		moves int // deadlines set in the future, the guard's included
	}{
		{"one read", []string{`{"model":"m"}`}, 1},
		{"three reads", []string{`{"model"`, `:`, `"m"}`}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &deadlineWriter{ResponseWriter: httptest.NewRecorder()}
			b := &slowBody{ReadCloser: io.NopCloser(&oneByOne{parts: tc.parts}), rc: http.NewResponseController(w), timeout: time.Minute, fresh: true}
			b.extend() // as the guard does when it wraps the body
			got, err := io.ReadAll(b)
			if err != nil || string(got) != strings.Join(tc.parts, "") {
				t.Fatalf("read %q, %v", got, err)
			}
			if len(w.set) != tc.moves+1 {
				t.Fatalf("%d deadline changes, want %d moves and the lift", len(w.set), tc.moves)
			}
			for i, d := range w.set[:tc.moves] {
				if d.IsZero() {
					t.Errorf("change %d lifted the deadline before the body's end", i)
				}
			}
			if last := w.set[len(w.set)-1]; !last.IsZero() {
				t.Errorf("the deadline was left at %v after the body's end", last)
			}
		})
	}
}

// TestHeaderBytesFromTheEngine: the guard's header size from the sum
// gatehouse's engine took as it checked the fields is the size a walk of
// the header map gives, for repeated fields and an absent Host too.
func TestHeaderBytesFromTheEngine(t *testing.T) {
	type sizes struct{ engine, walked int64 }
	got := make(chan sizes, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	engine := &h1.Server{ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h1.RequestNotesOf(w) == nil {
			t.Error("no RequestNotes on the engine's writer")
		}
		got <- sizes{headerBytes(w, r), headerBytes(httptest.NewRecorder(), r)}
	})}
	go func() { _ = engine.Serve(ln) }()
	t.Cleanup(func() { _ = engine.Close() })
	for _, head := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /v1/models?x=1 HTTP/1.0\r\n\r\n",
		"POST /v1/chat/completions HTTP/1.1\r\nHost: gw.example\r\nAuthorization: Bearer sk-1\r\nAccept: a\r\nAccept: b\r\nX-Empty:\r\nContent-Length: 0\r\n\r\n",
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		s := <-got
		if s.engine != s.walked {
			t.Errorf("%q: %d bytes from the engine's notes, %d from the map", head, s.engine, s.walked)
		}
	}
}
