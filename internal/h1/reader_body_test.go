package h1

import (
	"bufio"
	"io"
	"net/http"
	"runtime"
	"testing"
	"weak"
)

// TestBodyAtEOFFreesReadBuffer: once a request's body is read to its
// end, the connection's read buffer, given back to its pool, is not kept
// reachable by the request the handler still holds (net/http's body
// reads from it): after collections have emptied the pool it is freed
// while the handler runs on, as a stream's does.
func TestBodyAtEOFFreesReadBuffer(t *testing.T) {
	freed := make(chan bool, 1)
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := weak.Make(w.(*response).c.bufr)
		if _, err := io.ReadAll(r.Body); err != nil {
			t.Error(err)
		}
		// Three collections: the pool's contents go to its victim cache
		// at the first and are dropped at the second.
		for range 3 {
			runtime.GC()
		}
		freed <- buf.Value() == nil
		runtime.KeepAlive(r)
		_, _ = io.WriteString(w, "ok")
	})})
	c := dial(t, addr)
	const body = `{"model":"chat","stream":true}`
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n"+body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "ok" {
		t.Fatalf("answer %q", b)
	}
	if !<-freed {
		t.Error("the read buffer is still reachable while the handler holds its request")
	}
}
