package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/llm"
)

// countingBody is an upstream body that counts the bytes taken from it
// and whether it was closed.
type countingBody struct {
	r      io.Reader
	read   int64
	closed bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

func (b *countingBody) Close() error { b.closed = true; return nil }

func TestReadBodyBound(t *testing.T) {
	const limit = 1000
	for _, tc := range []struct {
		name          string
		size          int
		contentLength int64 // -1: unknown (chunked)
		wantErr       bool
		maxRead       int64 // the most of the body ReadBody may take
	}{
		{"at the limit, announced", limit, limit, false, limit},
		{"at the limit, chunked", limit, -1, false, limit},
		{"one over, announced", limit + 1, limit + 1, true, 0},
		{"enormous, announced", 1 << 20, 1 << 20, true, 0},
		{"enormous, chunked", 1 << 20, -1, true, limit + 1},
		// A Content-Length that lies low is no way around the bound.
		{"enormous, announced small", 1 << 20, 10, true, limit + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &countingBody{r: strings.NewReader(strings.Repeat("x", tc.size))}
			got, err := ReadBody(&http.Response{Body: body, ContentLength: tc.contentLength}, limit)
			if !body.closed {
				t.Error("the body was not closed")
			}
			if body.read > tc.maxRead {
				t.Errorf("read %d bytes of the body, want at most %d", body.read, tc.maxRead)
			}
			if !tc.wantErr {
				if err != nil || len(got) != tc.size {
					t.Fatalf("got %d bytes, %v; want the whole %d", len(got), err, tc.size)
				}
				return
			}
			var ge *llm.Error
			if !errors.As(err, &ge) || ge.Code != "upstream_response_too_large" || ge.Status != http.StatusBadGateway ||
				!strings.Contains(ge.Message, "1000 bytes") {
				t.Fatalf("got %v; want a 502 upstream_response_too_large naming the limit", err)
			}
		})
	}
}

// A body of known length is read into one allocation of its size (and
// the room to splice its cost in): no growth past it, no copy (bytes.Buffer.ReadFrom took three allocations
// for the same body).
func TestReadBodyAllocatesOnce(t *testing.T) {
	const size = 650 // a small chat completion
	s := strings.Repeat("x", size)
	r := strings.NewReader(s)
	resp := &http.Response{Body: io.NopCloser(r), ContentLength: size}
	var got []byte
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(s)
		var err error
		if got, err = ReadBody(resp, 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	if string(got) != s {
		t.Fatalf("read %d bytes, want the %d sent", len(got), size)
	}
	if allocs != 1 {
		t.Errorf("%v allocations a body, want 1", allocs)
	}
	if cap(got) != size+1+llm.SpliceRoom { // the byte that meets io.EOF, and room for the cost
		t.Errorf("buffer of %d bytes for a body of %d, want %d", cap(got), size, size+1+llm.SpliceRoom)
	}
}

// TestNewRequestHeaders: NewRequest stores its headers under their names
// directly, so each name must be canonical for Get to find it and for the
// wire to carry it as Header.Set would; a configured header of the same
// name gives way to them as it did to Set.
func TestNewRequestHeaders(t *testing.T) {
	for _, n := range []string{HeaderContentType, HeaderAccept, HeaderAuthorization} {
		if c := http.CanonicalHeaderKey(n); c != n {
			t.Errorf("%q is stored directly but its canonical form is %q", n, c)
		}
	}
	d := &Deployment{Provider: "p", Header: http.Header{"Accept": {"text/html"}, "X-Team": {"a"}}}
	r, err := NewRequest(context.Background(), d, http.MethodPost, "http://up/x", []byte("{}"), "text/event-stream")
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"Content-Type": {"application/json"}, "Accept": {"text/event-stream"}, "X-Team": {"a"}}
	if diff := cmp.Diff(want, r.Header); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	r, _ = NewRequest(context.Background(), d, http.MethodGet, "http://up/x", nil, "application/json")
	if got := r.Header.Get("Content-Type"); got != "" {
		t.Errorf("a request with no body has Content-Type %q", got)
	}
}
