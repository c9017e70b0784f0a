package provider

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHandlerTransportStreamsEachFlush(t *testing.T) {
	next := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", "yes")
		w.WriteHeader(201)
		for i := 0; i < 3; i++ {
			io.WriteString(w, "line\n")
			w.(http.Flusher).Flush()
			<-next
		}
	})
	req, _ := http.NewRequest(http.MethodPost, "http://inproc/x", strings.NewReader("{}"))
	resp, err := (&http.Client{Transport: HandlerTransport{Handler: h}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 201 || resp.Header.Get("X-Test") != "yes" {
		t.Fatalf("status %d header %v", resp.StatusCode, resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 3; i++ {
		// Each line must be readable before the handler writes the next.
		line, err := br.ReadString('\n')
		if err != nil || line != "line\n" {
			t.Fatalf("line %d: %q %v", i, line, err)
		}
		next <- struct{}{}
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Fatalf("unexpected trailing %q", rest)
	}
}

func TestHandlerTransportCancelReachesHandler(t *testing.T) {
	cancelled := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(cancelled)
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://inproc/", nil)
	resp, err := (&http.Client{Transport: HandlerTransport{Handler: h}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	cancel()
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("handler context not cancelled")
	}
}

func TestHandlerTransportAbortIsUnexpectedEOF(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		panic(http.ErrAbortHandler)
	})
	req, _ := http.NewRequest(http.MethodGet, "http://inproc/", nil)
	resp, err := (&http.Client{Transport: HandlerTransport{Handler: h}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if string(b) != "partial" || err != io.ErrUnexpectedEOF {
		t.Fatalf("got %q, %v", b, err)
	}
}
