package h1

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFieldWriter: lines handed over through FieldWriter go out with the
// map's fields, once, on every answer of a connection (the buffer is
// reused), in a header net/http's client parses; lines handed over after
// the header, and the map's changes after it, are not sent; a 1xx does
// not carry them.
func TestFieldWriter(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fw := w.(FieldWriter)
		n := r.URL.Query().Get("n")
		w.Header().Set("X-Map", "m"+n)
		b := fw.FieldBuffer()
		b = append(b, "X-Raw-One: 1-"...)
		b = append(b, n...)
		b = append(b, "\r\nX-Raw-Two: two\r\n"...)
		fw.AppendFields(b, false)
		// Formatted elsewhere: copied.
		fw.AppendFields([]byte("X-Raw-Three: "+strings.Repeat("3", 600)+"\r\n"), false)
		if r.URL.Path == "/early" {
			w.WriteHeader(http.StatusEarlyHints)
		}
		w.WriteHeader(http.StatusCreated)
		fw.AppendFields([]byte("X-Late: late\r\n"), false)
		w.Header().Set("X-Late-Map", "late")
		_, _ = io.WriteString(w, "body "+n)
	})})
	c := dial(t, addr)
	br := bufio.NewReader(c)
	for _, n := range []string{"1", "22", "333"} {
		for _, path := range []string{"/", "/early"} {
			if _, err := io.WriteString(c, "GET "+path+"?n="+n+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if path == "/early" {
				// The 1xx: the map's fields only.
				line, _ := br.ReadString('\n')
				if line != "HTTP/1.1 103 Early Hints\r\n" {
					t.Fatalf("interim status line %q", line)
				}
				var head []string
				for {
					l, err := br.ReadString('\n')
					if err != nil {
						t.Fatal(err)
					}
					if l == "\r\n" {
						break
					}
					head = append(head, l)
				}
				if diff := cmp.Diff([]string{"X-Map: m" + n + "\r\n"}, head); diff != "" {
					t.Errorf("%s?n=%s: 103 fields (-want +got):\n%s", path, n, diff)
				}
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusCreated || string(body) != "body "+n {
				t.Fatalf("%s?n=%s: %d %q", path, n, resp.StatusCode, body)
			}
			resp.Header.Del("Date")
			want := http.Header{
				"X-Map":          {"m" + n},
				"X-Raw-One":      {"1-" + n},
				"X-Raw-Two":      {"two"},
				"X-Raw-Three":    {strings.Repeat("3", 600)},
				"Content-Length": {strconv.Itoa(len(body))},
				"Content-Type":   {"text/plain; charset=utf-8"},
			}
			if diff := cmp.Diff(want, resp.Header); diff != "" {
				t.Errorf("%s?n=%s: header (-want +got):\n%s", path, n, diff)
			}
		}
	}
}

// TestGetIsHeaderGet: get finds what Header.Get finds for the names
// writeHead looks up, however the handler set them.
func TestGetIsHeaderGet(t *testing.T) {
	for _, name := range []string{"Content-Length", "Transfer-Encoding", "Connection", "Content-Encoding"} {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("%q is not canonical (%q)", name, c)
		}
		for _, h := range []http.Header{{}, {name: {"a", "b"}}, {name: {}}, {strings.ToLower(name): {"x"}}} {
			if got, want := get(h, name), h.Get(name); got != want {
				t.Errorf("%v: get %q, Header.Get %q", h, got, want)
			}
		}
	}
}

// TestHasToken: a token counts between spaces, tabs and commas, as
// net/http's server reads Connection and Expect.
func TestHasToken(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{
		{"close", true}, {"Close", true}, {"0 Close", true}, {"keep-alive, close", true}, {"x,\tclose ", true},
		{"closed", false}, {"unclose", false}, {"clo", false}, {"", false}, {"close-ish", false},
	} {
		if got := hasToken(c.v, "close"); got != c.want {
			t.Errorf("hasToken(%q, close) = %v, want %v", c.v, got, c.want)
		}
	}
}

// TestFieldWriterTyped: a Content-Type handed over as a line, said so,
// is the answer's only one (the engine sniffs none from the body); one
// not said so gets a sniffed one next to it, which is why typed exists.
func TestFieldWriterTyped(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.(FieldWriter).AppendFields([]byte("Content-Type: application/json\r\n"), r.URL.Path == "/typed")
		_, _ = io.WriteString(w, "<html>{}</html>")
	})})
	for path, want := range map[string][]string{
		"/typed":   {"application/json"},
		"/untyped": {"application/json", "text/html; charset=utf-8"},
	} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if diff := cmp.Diff(want, resp.Header["Content-Type"]); diff != "" {
			t.Errorf("%s: Content-Type (-want +got):\n%s", path, diff)
		}
	}
}

// TestFieldBufferNotHeldByStream: a connection keeps its field buffer
// from answer to answer, but a response that flushes (a stream, which
// may hold the connection for minutes) gives it back to the pool at
// once, and the next answer on the connection takes one again.
func TestFieldBufferNotHeldByStream(t *testing.T) {
	type seen struct{ heldBefore, heldAfterFlush bool }
	seenc := make(chan seen, 4)
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := w.(*response).c
		var s seen
		s.heldBefore = c.fieldBuf != nil
		fw := w.(FieldWriter)
		fw.AppendFields(append(fw.FieldBuffer(), "X-Raw: 1\r\n"...), false)
		_, _ = io.WriteString(w, "data\n")
		if r.URL.Path == "/stream" {
			w.(http.Flusher).Flush()
			s.heldAfterFlush = c.fieldBuf != nil
		}
		seenc <- s
	})})
	c := dial(t, addr)
	br := bufio.NewReader(c)
	var got []seen
	for _, path := range []string{"/", "/", "/stream", "/"} {
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.Header.Get("X-Raw") != "1" {
			t.Fatalf("%s: header %v", path, resp.Header)
		}
		got = append(got, <-seenc)
	}
	want := []seen{{false, false}, {true, false}, {true, false}, {false, false}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("field buffer held (-want +got):\n%s", diff)
	}
}

// TestRequestNotes: the engine notes whether a field of its NotePrefix
// came (in any case on the wire, anywhere among the fields, named by the
// prefix alone too), sums the fields as lines, one per value, as a walk
// of the parsed map does, and says it did not look for a prefix that is
// not its own, nor for any when it has none.
func TestRequestNotes(t *testing.T) {
	type notes struct {
		Has, Known, OtherKnown bool
		Bytes, Walked          int
	}
	got := make(chan notes, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := RequestNotesOf(w)
		if n == nil {
			t.Error("no RequestNotes on the engine's writer")
			return
		}
		var o notes
		o.Has, o.Known = n.Prefixed("X-Note-")
		_, o.OtherKnown = n.Prefixed("X-Other-")
		o.Bytes = n.FieldBytes()
		for k, vs := range r.Header {
			for _, v := range vs {
				o.Walked += len(k) + len(": ") + len(v) + len("\r\n")
			}
		}
		got <- o
	})
	noted := serve(t, &Server{Handler: handler, NotePrefix: "X-Note-"})
	plain := serve(t, &Server{Handler: handler})
	for _, tc := range []struct {
		addr, fields string
		has, known   bool
	}{
		{noted, "", false, true},
		{noted, "Accept: */*\r\nUser-Agent: t\r\n", false, true},
		{noted, "Accept: */*\r\nx-note-team: blue\r\nUser-Agent: t\r\n", true, true},
		{noted, "X-NOTE-A: 1\r\nX-Note-A: 2\r\nX-Noted: 3\r\n", true, true},
		{noted, "X-Note-: 1\r\n", true, true},
		{noted, "X-Not: 1\r\nX-Notes-A: 2\r\nY-Note-A: 3\r\n", false, true},
		{plain, "x-note-team: blue\r\n", false, false},
	} {
		c := dial(t, tc.addr)
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"+tc.fields+"\r\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
		o := <-got
		if o.Has != tc.has || o.Known != tc.known || o.OtherKnown {
			t.Errorf("%q: Prefixed %v, %v (another prefix known: %v), want %v, %v", tc.fields, o.Has, o.Known, o.OtherKnown, tc.has, tc.known)
		}
		if o.Bytes != o.Walked {
			t.Errorf("%q: FieldBytes %d, the map's walk %d", tc.fields, o.Bytes, o.Walked)
		}
	}
	if RequestNotesOf(struct{ http.ResponseWriter }{}) != nil {
		t.Error("RequestNotes found on a writer without them")
	}
}

// unwrapper is a middleware's writer that unwraps to the one it wraps,
// as http.ResponseController expects.
type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// TestFindersUnwrap: FieldWriterOf and RequestNotesOf find the engine's
// writer through wrappers that unwrap to it, and nothing through one
// that does not.
func TestFindersUnwrap(t *testing.T) {
	type found struct{ fields, notes, hiddenFields, hiddenNotes bool }
	got := make(chan found, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wrapped := unwrapper{unwrapper{w}}
		hidden := struct{ http.ResponseWriter }{w}
		got <- found{FieldWriterOf(wrapped) != nil, RequestNotesOf(wrapped) != nil,
			FieldWriterOf(unwrapper{hidden}) != nil, RequestNotesOf(unwrapper{hidden}) != nil}
	})
	c := dial(t, serve(t, &Server{Handler: handler}))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
		t.Fatal(err)
	}
	if f := <-got; f != (found{fields: true, notes: true}) {
		t.Errorf("found %+v; want the engine's writer through unwrapping wrappers only", f)
	}
}
