package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// ev is an Event with its data held as a string, so it outlives Next.
type ev struct {
	Name, ID, Data string
}

// readEvents reads r to its end and returns the events and the error that
// ended them.
func readEvents(r io.Reader) ([]ev, error) {
	rd := NewReader(r)
	var out []ev
	for {
		e, err := rd.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev{e.Name, e.ID, string(e.Data)})
		if len(out) > 1<<20 {
			return out, errors.New("test: runaway reader")
		}
	}
}

// feeds are the ways a stream may arrive.
func feeds(stream string) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":           func() io.Reader { return strings.NewReader(stream) },
		"one byte a read": func() io.Reader { return iotest.OneByteReader(strings.NewReader(stream)) },
		"EOF with data":   func() io.Reader { return iotest.DataErrReader(strings.NewReader(stream)) },
		"half reads":      func() io.Reader { return iotest.HalfReader(strings.NewReader(stream)) },
	}
}

const (
	chunk1 = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`
	chunk2 = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hello\n:data: x"},"finish_reason":null}]}`
	chunk3 = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	chunk4 = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`
)

var sseTests = []struct {
	name   string
	stream string
	want   []ev
}{
	{"empty", "", nil},
	{"only blank lines", "\n\r\n\r\n\n", nil},
	{"only comments", ": hello\n:\n\n: keep-alive\r\n\r\n", nil},
	{
		"OpenAI chat stream",
		"data: " + chunk1 + "\n\n" + "data: " + chunk2 + "\n\n" + "data: " + chunk3 + "\n\n" + "data: " + chunk4 + "\n\n" + "data: [DONE]\n\n",
		[]ev{{Data: chunk1}, {Data: chunk2}, {Data: chunk3}, {Data: chunk4}, {Data: "[DONE]"}},
	},
	{
		"OpenAI chat stream with CRLF and keep-alives",
		": OPENROUTER PROCESSING\r\n\r\ndata: " + chunk1 + "\r\n\r\n: ping\r\n\r\ndata: " + chunk3 + "\r\n\r\ndata: [DONE]\r\n\r\n",
		[]ev{{Data: chunk1}, {Data: chunk3}, {Data: "[DONE]"}},
	},
	{"one event", "data: x\n\n", []ev{{Data: "x"}}},
	{"multi-line data", "data: a\ndata: b\ndata:\ndata: c\n\n", []ev{{Data: "a\nb\n\nc"}}},
	{"multi-line data, CRLF", "data: a\r\ndata: b\r\n\r\n", []ev{{Data: "a\nb"}}},
	{"multi-line data, lone CR", "data: a\rdata: b\r\rdata: c\r\r", []ev{{Data: "a\nb"}, {Data: "c"}}},
	{"mixed line endings", "data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\n\n", []ev{{Data: "a\nb\nc"}, {Data: "d"}}},
	{"CR then LF is one line end", "data: a\r\n\r\ndata: b\r\n\r\n", []ev{{Data: "a"}, {Data: "b"}}},
	{"LF then CR is two line ends", "data: a\n\rdata: b\n\n", []ev{{Data: "a"}, {Data: "b"}}},
	{"CR CR LF", "data: a\r\r\ndata: b\n\n", []ev{{Data: "a"}, {Data: "b"}}},
	{"comments between lines", ": first\ndata: a\n:data: not data\ndata: b\n: last\n\n", []ev{{Data: "a\nb"}}},
	{"event and id", "event: completion\nid: 42\ndata: {}\n\n", []ev{{Name: "completion", ID: "42", Data: "{}"}}},
	{"field order does not matter", "data: {}\nid: 7\nevent: e\n\n", []ev{{Name: "e", ID: "7", Data: "{}"}}},
	{"last event field wins", "event: a\nevent: b\ndata: x\n\n", []ev{{Name: "b", Data: "x"}}},
	{"event name is per event", "event: a\ndata: 1\n\ndata: 2\n\n", []ev{{Name: "a", Data: "1"}, {Data: "2"}}},
	{"event without data is not dispatched", "event: a\n\ndata: 2\n\n", []ev{{Data: "2"}}},
	{"id with NUL is ignored", "id: a\x00b\ndata: x\n\n", []ev{{Data: "x"}}},
	{"blank lines between events", "\n\n\ndata: a\n\n\n\n\r\n\rdata: b\n\n\n", []ev{{Data: "a"}, {Data: "b"}}},
	{"final event unterminated", "data: a\n\ndata: b\n", []ev{{Data: "a"}}},
	{"final event without newline", "data: a\n\ndata: b", []ev{{Data: "a"}}},
	{"final event ends in one CR", "data: a\r\rdata: b\r", []ev{{Data: "a"}}},
	{"final event with a field after data", "data: a\n\ndata: b\nevent: x\n", []ev{{Data: "a"}}},
	{"field without colon", "data\n\n", []ev{{Data: ""}}},
	{"two fields without colon", "data\ndata\n\n", []ev{{Data: "\n"}}},
	{"event without colon", "event\ndata: x\n\n", []ev{{Data: "x"}}},
	{"unknown field without colon", "foo\ndata: x\n\n", []ev{{Data: "x"}}},
	{"data with no space", "data:x\n\n", []ev{{Data: "x"}}},
	{"data with two spaces", "data:  x\n\n", []ev{{Data: " x"}}},
	{"data with a tab", "data:\tx\n\n", []ev{{Data: "\tx"}}},
	{"empty data", "data:\n\n", []ev{{Data: ""}}},
	{"empty data with space", "data: \n\n", []ev{{Data: ""}}},
	{"colon in value", "data: a: b\n\n", []ev{{Data: "a: b"}}},
	{"event with no space", "event:e\nid:1\ndata:x\n\n", []ev{{Name: "e", ID: "1", Data: "x"}}},
	{"event trailing space kept", "event: e \ndata: x\n\n", []ev{{Name: "e ", Data: "x"}}},
	{"field names are case-sensitive", "Data: x\nDATA: y\n\ndata: z\n\n", []ev{{Data: "z"}}},
	{"field name with leading space", " data: x\n\ndata: z\n\n", []ev{{Data: "z"}}},
	{"unknown fields ignored", "retry: 100\nfoo: bar\ndata: x\n\n", []ev{{Data: "x"}}},
	{"BOM stripped", "\xef\xbb\xbfdata: a\n\n", []ev{{Data: "a"}}},
	{"only one BOM stripped", "\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n", []ev{{Data: "b"}}},
	{"BOM later is data", "data: a\n\n\xef\xbb\xbfdata: b\n\ndata: \xef\xbb\xbfc\n\n", []ev{{Data: "a"}, {Data: "\xef\xbb\xbfc"}}},
	{"UTF-8 and invalid bytes pass through", "data: héllo \xff\xfe 😀\n\n", []ev{{Data: "héllo \xff\xfe 😀"}}},
	{"NUL in data", "data: a\x00b\n\n", []ev{{Data: "a\x00b"}}},
	{"line longer than the buffer", "data: " + strings.Repeat("x", 40<<10) + "\r\ndata: y\r\n\r\n", []ev{{Data: strings.Repeat("x", 40<<10) + "\ny"}}},
}

func TestReader(t *testing.T) {
	for _, tt := range sseTests {
		t.Run(tt.name, func(t *testing.T) {
			for feed, r := range feeds(tt.stream) {
				got, err := readEvents(r())
				if err != io.EOF {
					t.Errorf("%s: ended with %v, want io.EOF", feed, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s: events (-want +got):\n%s", feed, diff)
				}
			}
		})
	}
}

// TestReaderSplit feeds each stream in two reads, split at every position.
func TestReaderSplit(t *testing.T) {
	for _, tt := range sseTests {
		if len(tt.stream) > 4<<10 {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			for i := 0; i <= len(tt.stream); i++ {
				r := io.MultiReader(strings.NewReader(tt.stream[:i]), strings.NewReader(tt.stream[i:]))
				got, err := readEvents(r)
				if err != io.EOF {
					t.Errorf("split at %d: ended with %v, want io.EOF", i, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("split at %d (%q | %q): events (-want +got):\n%s", i, tt.stream[:i], tt.stream[i:], diff)
				}
			}
		})
	}
}

func TestReaderEOFSticky(t *testing.T) {
	rd := NewReader(strings.NewReader("data: aaaa\n\ndata: bbbb\n\n"))
	first, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(first.Data) != "aaaa" {
		t.Fatalf("first event = %q", first.Data)
	}
	second, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(second.Data) != "bbbb" {
		t.Fatalf("second event = %q", second.Data)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Errorf("after the last event: %v, want io.EOF", err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Errorf("Next after io.EOF: %v, want io.EOF again", err)
	}
}

func TestReaderError(t *testing.T) {
	boom := errors.New("connection reset")
	tests := []struct {
		name   string
		stream string
		want   []ev
	}{
		{"mid event", "data: a\n\ndata: b\n", []ev{{Data: "a"}}},
		{"mid line", "data: a\n\ndata: b", []ev{{Data: "a"}}},
		{"after CR", "data: a\r\r", []ev{{Data: "a"}}},
		{"at start", "", nil},
	}
	for _, tt := range tests {
		for feed, r := range feeds(tt.stream) {
			got, err := readEvents(io.MultiReader(r(), iotest.ErrReader(boom)))
			if err != boom {
				t.Errorf("%s, %s: ended with %v, want %v", tt.name, feed, err, boom)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s, %s: events (-want +got):\n%s", tt.name, feed, diff)
			}
		}
	}
}

// TestReaderNoReadAhead checks Next hands an event on as soon as its blank
// line is in, without waiting for more of the stream.
func TestReaderNoReadAhead(t *testing.T) {
	tests := []struct {
		name   string
		writes []string // writes[i] completes want[i]; any extra follow
		want   []ev
	}{
		{"LF", []string{"data: a\n\n", "event: e\ndata: b\n\n", "data: [DONE]\n\n"}, []ev{{Data: "a"}, {Name: "e", Data: "b"}, {Data: "[DONE]"}}},
		{"CRLF", []string{"data: a\r\n\r\n", "data: b\r\n\r\n"}, []ev{{Data: "a"}, {Data: "b"}}},
		{"CR", []string{"data: a\r\r", "data: b\r\r"}, []ev{{Data: "a"}, {Data: "b"}}},
		// The \n of the blank line's \r\n arrives with the next event.
		{"CRLF split after CR", []string{"data: a\r\n\r", "\ndata: b\r\n\r", "\n: bye\r\n"}, []ev{{Data: "a"}, {Data: "b"}}},
		{"comment first", []string{": ping\n\ndata: a\n\n", ": ping\n: ping\ndata: b\n\n"}, []ev{{Data: "a"}, {Data: "b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pr.Close()
			rd := NewReader(pr)
			for i := range tt.want {
				go func() { _, _ = pw.Write([]byte(tt.writes[i])) }()
				type result struct {
					e   ev
					err error
				}
				done := make(chan result, 1)
				go func() {
					e, err := rd.Next()
					done <- result{ev{e.Name, e.ID, string(e.Data)}, err}
				}()
				select {
				case res := <-done:
					if res.err != nil {
						t.Fatalf("event %d: %v", i, res.err)
					}
					if diff := cmp.Diff(tt.want[i], res.e); diff != "" {
						t.Errorf("event %d (-want +got):\n%s", i, diff)
					}
				case <-time.After(5 * time.Second):
					pw.CloseWithError(errors.New("test timed out"))
					t.Fatalf("event %d: Next still blocked after its blank line was written", i)
				}
			}
			go func() {
				for _, w := range tt.writes[len(tt.want):] {
					_, _ = pw.Write([]byte(w))
				}
				_ = pw.Close()
			}()
			if _, err := rd.Next(); err != io.EOF {
				t.Errorf("after the last event: %v, want io.EOF", err)
			}
		})
	}
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), c.n)])
}

func TestReaderTooLarge(t *testing.T) {
	// The real limit is 8 MiB; under the race detector, which makes
	// scanning megabytes 40 times slower, the same cases run at a
	// smaller limit: the edges are the same edges.
	limit := maxEventSize
	if raceEnabled {
		limit = 256 << 10
	}
	longest := "data: " + strings.Repeat("x", limit-len("data: "))
	tests := []struct {
		name    string
		stream  string
		wantErr error
	}{
		{"longest line", longest + "\n\n", io.EOF},
		{"line one byte too long", longest + "x\n\n", ErrEventTooLarge},
		{"line too long, no end", longest + strings.Repeat("x", 100), ErrEventTooLarge},
		{"event too large in many lines", strings.Repeat("data: "+strings.Repeat("y", limit/8-1)+"\n", 9) + "\n", ErrEventTooLarge},
		{"two events, each fine", strings.Repeat("data: "+strings.Repeat("y", limit*5/8)+"\n\n", 2), io.EOF},
		{"long comment line", ":" + strings.Repeat("c", limit) + "\n\ndata: x\n\n", ErrEventTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// 4093 makes reads straddle the limit differently from the
			// reader's own 16 KiB buffer.
			for _, n := range []int{1 << 30, 4093} {
				rd := NewReader(chunkReader{strings.NewReader(tt.stream), n})
				rd.max = limit
				var err error
				for err == nil {
					_, err = rd.Next()
				}
				if err != tt.wantErr {
					t.Errorf("reads of %d bytes: ended with %v, want %v", n, err, tt.wantErr)
				}
			}
		})
	}
}

func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name, event, data, want string
	}{
		{"plain", "", `{"a":1}`, "data: {\"a\":1}\n\n"},
		{"named", "error", `{}`, "event: error\ndata: {}\n\n"},
		{"empty", "", "", "data: \n\n"},
		{"newlines", "", "a\nb\n\nc", "data: a\ndata: b\ndata: \ndata: c\n\n"},
		{"trailing newline", "", "a\n", "data: a\ndata: \n\n"},
		{"leading space kept", "", " x", "data:  x\n\n"},
		{"done", "", "[DONE]", "data: [DONE]\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := []byte("prev\n\n")
			got := AppendEvent(bytes.Clone(prefix), tt.event, []byte(tt.data))
			if string(got) != string(prefix)+tt.want {
				t.Errorf("AppendEvent(%q, %q) = %q, want %q", tt.event, tt.data, got[len(prefix):], tt.want)
			}
			evs, err := readEvents(bytes.NewReader(got[len(prefix):]))
			if err != io.EOF {
				t.Fatalf("reading back: %v", err)
			}
			if diff := cmp.Diff([]ev{{Name: tt.event, Data: tt.data}}, evs); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzSSE(f *testing.F) {
	for _, tt := range sseTests {
		if len(tt.stream) < 1<<10 {
			f.Add([]byte(tt.stream), "")
		}
	}
	f.Add([]byte("a\nb\r\n\n"), "message")
	f.Add([]byte(chunk2), "delta")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		whole, wholeErr := readEvents(bytes.NewReader(data))
		if wholeErr != io.EOF {
			t.Fatalf("whole: ended with %v, want io.EOF", wholeErr)
		}
		oneByte, err := readEvents(iotest.OneByteReader(bytes.NewReader(data)))
		if err != wholeErr {
			t.Fatalf("one byte a read: ended with %v, whole with %v", err, wholeErr)
		}
		if diff := cmp.Diff(whole, oneByte); diff != "" {
			t.Fatalf("%q: whole vs one byte a read (-whole +one):\n%s", data, diff)
		}
		for _, e := range whole {
			if strings.ContainsAny(e.Name+e.ID+e.Data, "\r") || strings.ContainsAny(e.Name+e.ID, "\n") {
				t.Fatalf("%q: a line terminator leaked into %+v", data, e)
			}
		}

		// Round trip: anything without a CR survives AppendEvent.
		if bytes.IndexByte(data, '\r') >= 0 {
			return
		}
		if strings.ContainsAny(name, "\r\n") {
			name = ""
		}
		stream := AppendEvent(nil, name, data)
		stream = AppendEvent(stream, "", data)
		want := []ev{{Name: name, Data: string(data)}, {Data: string(data)}}
		for feed, r := range feeds(string(stream)) {
			got, err := readEvents(r())
			if err != io.EOF {
				t.Fatalf("round trip, %s: ended with %v", feed, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("round trip of %q, %s (-want +got):\n%s", data, feed, diff)
			}
		}
	})
}

// ExampleAppendEvent shows the wire form of a multi-line event.
func ExampleAppendEvent() {
	fmt.Printf("%q\n", AppendEvent(nil, "error", []byte("line 1\nline 2")))
	// Output: "event: error\ndata: line 1\ndata: line 2\n\n"
}

func TestReaderHasEvent(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool // after reading the first event
	}{
		{"data: a\n\ndata: b\n\n", true},
		{"data: a\n\ndata: b\n", false},
		{"data: a\r\n\r\ndata: b\r\n\r\n", true},
		{"data: a\r\rdata: b\r\r", true},
		{"data: a\n\n", false},
		{"data: a\n\n\n\n", false},       // keep-alive blank lines dispatch nothing
		{"data: a\n\n: ping\n\n", false}, // nor do comments
	} {
		r := NewReader(strings.NewReader(tc.in))
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if got := r.HasEvent(); got != tc.want {
			t.Errorf("%q: HasEvent %v, want %v", tc.in, got, tc.want)
		}
	}
}
