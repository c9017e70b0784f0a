package server

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"

	"gatehouse/internal/h1"
	"gatehouse/internal/provider"
)

// fieldRecorder is a ResponseRecorder that takes lines as the engine
// does (h1.FieldWriter): what it sends is the map's fields and the lines
// handed over before WriteHeader.
type fieldRecorder struct {
	*httptest.ResponseRecorder
	lines []byte
	wrote bool
}

func (f *fieldRecorder) WriteHeader(code int) {
	f.wrote = true
	f.ResponseRecorder.WriteHeader(code)
}

func (f *fieldRecorder) Write(p []byte) (int, error) {
	f.wrote = true
	return f.ResponseRecorder.Write(p)
}

func (f *fieldRecorder) FieldBuffer() []byte { return f.lines[len(f.lines):] }

func (f *fieldRecorder) AppendFields(lines []byte, _ bool) {
	if !f.wrote {
		f.lines = append(f.lines, lines...)
	}
}

// sent is the header the client would get: the map's fields and the
// lines, parsed as a client parses them.
func (f *fieldRecorder) sent(t *testing.T) http.Header {
	t.Helper()
	h := f.Result().Header.Clone()
	lines, err := textproto.NewReader(bufio.NewReader(strings.NewReader(string(f.lines) + "\r\n"))).ReadMIMEHeader()
	if err != nil {
		t.Fatalf("lines %q: %v", f.lines, err)
	}
	for k, vv := range lines {
		h[k] = append(h[k], vv...)
	}
	return h
}

// TestFieldWriterOf: the engine's writer is found behind wrappers that
// unwrap (bodyCapture), and a writer without it is not taken for one.
func TestFieldWriterOf(t *testing.T) {
	f := &fieldRecorder{ResponseRecorder: httptest.NewRecorder()}
	if h1.FieldWriterOf(&bodyCapture{ResponseWriter: f}) != f {
		t.Error("not found behind bodyCapture")
	}
	if h1.FieldWriterOf(httptest.NewRecorder()) != nil {
		t.Error("a recorder taken for an h1.FieldWriter")
	}
}

// TestExchangeFieldLines: an exchange on an h1.FieldWriter sends each of its
// fields once, as a line and not in the map: the request id (and
// Anthropic's Request-Id) from the start, an answer's fields with it;
// after headers put them in the map, writeJSON leaves them there rather
// than send them twice.
func TestExchangeFieldLines(t *testing.T) {
	s, _ := newTestServer(t)
	for _, c := range []struct {
		name       string
		anthropic  bool
		mapHeaders bool
	}{{"openai", false, false}, {"anthropic", true, false}, {"after a stream's attempt", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			f := &fieldRecorder{ResponseRecorder: httptest.NewRecorder(), lines: make([]byte, 0, 512)}
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
			var x *exchange
			if c.anthropic {
				x = s.beginAnthropic(f, r)
			} else {
				x = s.begin(f, r)
			}
			if len(f.Header()) != 0 {
				t.Errorf("the map holds %v after begin", f.Header())
			}
			x.deployment, x.attempts = &provider.Deployment{Provider: "up\r\nX-Evil: 1", Model: "m-mini"}, 2
			if c.mapHeaders {
				x.headers()
			}
			x.writeJSON([]byte(`{}`))
			h := f.sent(t)
			want := map[string]string{
				"X-Gatehouse-Request-Id": x.id, "X-Gatehouse-Provider": "up  X-Evil: 1", "X-Gatehouse-Model": "m-mini",
				"X-Gatehouse-Attempts": "2", "X-Gatehouse-Cache": "bypass", "Content-Type": "application/json",
			}
			if c.anthropic {
				want["Request-Id"] = x.id
			}
			if c.mapHeaders {
				want["X-Gatehouse-Provider"] = "up\r\nX-Evil: 1" // the engine sanitises the map's values
			}
			for k, v := range want {
				if got := h[k]; len(got) != 1 || got[0] != v {
					t.Errorf("%s: %q, want once %q", k, got, v)
				}
			}
			if got := h["X-Gatehouse-Overhead-Ms"]; len(got) != 1 {
				t.Errorf("X-Gatehouse-Overhead-Ms: %q, want once", got)
			}
			if _, ok := h["X-Evil"]; ok {
				t.Error("a provider name's CR LF started a field of its own")
			}
			if inMap := f.Header().Get("X-Gatehouse-Provider") != ""; inMap != c.mapHeaders {
				t.Errorf("provider in the map: %v, want %v", inMap, c.mapHeaders)
			}
		})
	}
}

// TestAppendValue: a value goes out as it is when every byte may be in
// a header value, with the others turned into spaces otherwise, at
// every position of an eight-byte word and in the tail.
func TestAppendValue(t *testing.T) {
	for _, c := range []byte{0, '\t', '\n', '\r', 0x1f, ' ', 'a', '~', 0x7f, 0x80, 0xff} {
		for n := 1; n <= 19; n++ {
			for i := 0; i < n; i++ {
				v := []byte(strings.Repeat("m", n))
				v[i] = c
				in := string(v)
				if (c < ' ' && c != '\t') || c == 0x7f {
					v[i] = ' '
				}
				if got, want := string(appendValue(nil, in)), string(v); got != want {
					t.Errorf("byte %#x at %d of %d: %q, want %q", c, i, n, got, want)
				}
			}
		}
	}
}
