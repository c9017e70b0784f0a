package framing

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// serveWatched serves on a watched listener with connContext, answering
// each request with the value attached to its connection and whether it
// was ambiguous.
func serveWatched(t *testing.T, connContext func(context.Context, net.Conn) context.Context) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ConnContext: connContext, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%v %v", Attached(r.Context()), Ambiguous(r))
	})}
	go func() { _ = srv.Serve(Listen(ln, 0, nil)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// exchange sends raw on a new connection and returns the bodies of the
// n answers read back.
func exchange(t *testing.T, addr, raw string, n int) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var bodies []string
	for range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d of %d: %v", len(bodies)+1, n, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		bodies = append(bodies, string(b))
	}
	return bodies
}

// TestAttachedPerConnection: a connection's requests all find the value
// attached to it, another connection's find another, and the look-up
// that finds it still tells the ambiguous request.
func TestAttachedPerConnection(t *testing.T) {
	var made atomic.Int32
	addr := serveWatched(t, AttachingConnContext(func() any { return made.Add(1) }))
	const get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
	first := exchange(t, addr, get+get+strings.Replace(smuggled, "GET /admin/keys", "GET /next", 1), 3)
	if want := []string{"1 false", "1 false", "1 true"}; strings.Join(first, "|") != strings.Join(want, "|") {
		t.Fatalf("first connection: %q, want %q", first, want)
	}
	if second := exchange(t, addr, get, 1); second[0] != "2 false" {
		t.Fatalf("second connection: %q, want its own value, 2", second)
	}
}

// TestConnContextAttachesNothing: ConnContext alone finds the watched
// connection, with nothing attached.
func TestConnContextAttachesNothing(t *testing.T) {
	addr := serveWatched(t, ConnContext)
	got := exchange(t, addr, smuggled, 1)
	if got[0] != "<nil> true" {
		t.Fatalf("%q, want nothing attached and the request ambiguous", got)
	}
}
