package provider

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Prewarm leaves n open connections in the transport: the server holds
// every HEAD until all n have arrived, so each must have had a connection
// of its own, and n requests sent afterwards, all at once and held the
// same way, open no new one.
func TestPrewarmOpensConnections(t *testing.T) {
	const n = 5
	var conns atomic.Int64
	var mu sync.Mutex
	arrived, all := 0, make(chan struct{})
	barrier := func() {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		<-all
	}
	var heads atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			heads.Add(1)
			barrier()
			w.WriteHeader(http.StatusNotFound) // any answer keeps the connection
			return
		}
		if r.Header.Get("Authorization") != "" {
			t.Error("a request carried credentials")
		}
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	c := &http.Client{Transport: NewTransport()}
	if got := Prewarm(context.Background(), c, srv.URL+"/v1", n); got != n {
		t.Fatalf("Prewarm answered %d, want %d", got, n)
	}
	if conns.Load() != n || heads.Load() != n {
		t.Fatalf("%d connections, %d HEADs after Prewarm; want %d each", conns.Load(), heads.Load(), n)
	}
	// The next requests reuse them.
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := c.Get(srv.URL + "/v1/models")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	if conns.Load() != n {
		t.Fatalf("%d connections after %d more requests; the warm ones were not reused", conns.Load(), n)
	}
}

// An upstream that cannot be reached is no error: nothing answered.
func TestPrewarmUnreachable(t *testing.T) {
	d := NewDialer()
	d.Retries = 0
	c := &http.Client{Transport: NewTransportWith(d)}
	if got := Prewarm(context.Background(), c, "http://"+freeAddr(t)+"/v1", 3); got != 0 {
		t.Fatalf("Prewarm answered %d for an unreachable upstream", got)
	}
}
