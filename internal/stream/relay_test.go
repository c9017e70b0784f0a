package stream

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"gatehouse/internal/llm"
)

// fakeStream replays chunks, then err (io.EOF for a clean end).
type fakeStream struct {
	chunks []llm.Chunk
	err    error
	closed bool
}

func (f *fakeStream) Next() (llm.Chunk, error) {
	if len(f.chunks) == 0 {
		return llm.Chunk{}, f.err
	}
	c := f.chunks[0]
	f.chunks = f.chunks[1:]
	return c, nil
}

func (f *fakeStream) Close() error { f.closed = true; return nil }

var usage = llm.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}

func chunks() []llm.Chunk {
	return []llm.Chunk{
		{Data: []byte(`{"n":1}`)},
		{Data: []byte(`{"n":2}`)},
		{Data: []byte(`{"choices":[],"usage":{}}`), Usage: &usage, UsageOnly: true},
	}
}

func TestRelayWithholdsUsageChunkUnlessAsked(t *testing.T) {
	for _, include := range []bool{false, true} {
		rec := httptest.NewRecorder()
		events := 0
		res, err := Relay(rec, &fakeStream{chunks: chunks(), err: io.EOF}, Options{IncludeUsage: include, OnChunk: func() { events++ }})
		if err != nil {
			t.Fatal(err)
		}
		want := "data: {\"n\":1}\n\ndata: {\"n\":2}\n\n"
		if include {
			want += "data: {\"choices\":[],\"usage\":{}}\n\n"
		}
		want += "data: [DONE]\n\n"
		if rec.Body.String() != want {
			t.Errorf("include=%v body:\n%q\nwant\n%q", include, rec.Body.String(), want)
		}
		if !res.HasUsage || res.Usage != usage || !res.Done || events != 3 {
			t.Errorf("include=%v result %+v events %d", include, res, events)
		}
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || !rec.Flushed {
			t.Errorf("content type %q flushed %v", ct, rec.Flushed)
		}
	}
}

func TestRelayErrorBeforeFirstChunkWritesNothing(t *testing.T) {
	rec := httptest.NewRecorder()
	boom := &llm.Error{Kind: llm.KindUpstreamStatus, Status: 503, Message: "down"}
	res, err := Relay(rec, &fakeStream{err: boom}, Options{})
	if !errors.Is(err, boom) || res.Started {
		t.Fatalf("err %v started %v", err, res.Started)
	}
	if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Fatalf("wrote %q before any chunk", rec.Body.String())
	}
}

func TestRelayErrorMidStreamBecomesErrorEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	res, err := Relay(rec, &fakeStream{chunks: chunks()[:1], err: io.ErrUnexpectedEOF}, Options{})
	if err == nil || !res.Started || res.Done {
		t.Fatalf("err %v result %+v", err, res)
	}
	body := rec.Body.String()
	if !strings.HasPrefix(body, "data: {\"n\":1}\n\n") || !strings.Contains(body, `"code":"upstream_stream_broken"`) || strings.Contains(body, "[DONE]") {
		t.Fatalf("body %q", body)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
}

// pendingStream is a fakeStream whose chunks say whether the next one is
// already buffered, and which records the body as it stood at each Next.
type pendingStream struct {
	fakeStream
	pending []bool // pending[i]: after chunk i is returned, is chunk i+1 buffered?
	served  int
	rec     *flushRecorder
	seen    []string // flushed body at each call to Next
}

func (p *pendingStream) Next() (llm.Chunk, error) {
	p.seen = append(p.seen, p.rec.flushed)
	c, err := p.fakeStream.Next()
	if err == nil {
		p.served++
	}
	return c, err
}

func (p *pendingStream) Pending() bool {
	i := p.served - 1
	return i >= 0 && i < len(p.pending) && p.pending[i]
}

// flushRecorder remembers what had been flushed, which is what a client
// could have read.
type flushRecorder struct {
	*httptest.ResponseRecorder
	flushes int
	flushed string
}

func (f *flushRecorder) Flush() {
	f.flushes++
	f.flushed = f.Body.String()
	f.ResponseRecorder.Flush()
}

func TestRelayFlushesBeforeWaitingAndCoalescesBufferedChunks(t *testing.T) {
	rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder()}
	// Chunks 1 and 2 arrived together; the usage chunk (withheld from
	// this client) arrived with chunk 2; then the stream waits.
	s := &pendingStream{fakeStream: fakeStream{chunks: chunks(), err: io.EOF}, pending: []bool{true, true, false}, rec: rec}
	if _, err := Relay(rec, s, Options{}); err != nil {
		t.Fatal(err)
	}
	two := "data: {\"n\":1}\n\ndata: {\"n\":2}\n\n"
	// Next is called 4 times: before chunk 1, 2, usage, and the end. Before
	// the last call (which may wait on the network) both chunks must have
	// been flushed, even though the chunk just before was withheld.
	want := []string{"", "", "", two}
	if len(s.seen) != len(want) {
		t.Fatalf("Next called %d times, want %d", len(s.seen), len(want))
	}
	for i := range want {
		if s.seen[i] != want[i] {
			t.Errorf("before Next #%d the client had %q, want %q", i+1, s.seen[i], want[i])
		}
	}
	if rec.flushes != 2 { // once for the two chunks, once for [DONE]
		t.Errorf("%d flushes, want 2", rec.flushes)
	}
}

func TestRelayFlushesEachChunkWhenNothingIsBuffered(t *testing.T) {
	rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder()}
	s := &pendingStream{fakeStream: fakeStream{chunks: chunks(), err: io.EOF}, rec: rec}
	if _, err := Relay(rec, s, Options{IncludeUsage: true}); err != nil {
		t.Fatal(err)
	}
	if rec.flushes != 4 {
		t.Errorf("%d flushes, want one per chunk and one for [DONE]", rec.flushes)
	}
	if s.seen[1] != "data: {\"n\":1}\n\n" {
		t.Errorf("chunk 1 not flushed before waiting for chunk 2: %q", s.seen[1])
	}
}

// The sample keeps only each chunk's text; Sampled and Relayed count the
// chunks from their choices on.
func TestRelaySampleKeepsOnlyText(t *testing.T) {
	full := []llm.Chunk{
		{Data: []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"content":"Hello"}}]}`)},
		{Data: []byte(`{"id":"chatcmpl-1","model":"m \"choices\":","choices":[{"index":0,"delta":{"content":" world"}}]}`)},
		{Data: []byte(`{"id":"chatcmpl-1","object":"x"}`)}, // no choices: no text
	}
	rec := httptest.NewRecorder()
	res, err := Relay(rec, &fakeStream{chunks: full, err: io.EOF}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"Hello"` + "\n" + `" world"` + "\n"; string(res.Sample) != want {
		t.Fatalf("sample:\n%s\nwant:\n%s", res.Sample, want)
	}
	chunks := len(`{"choices":[{"index":0,"delta":{"content":"Hello"}}]}`+"\n") +
		len(`{"choices":[{"index":0,"delta":{"content":" world"}}]}`+"\n") +
		len(`{"id":"chatcmpl-1","object":"x"}`+"\n")
	if res.Relayed != chunks || res.Sampled != chunks {
		t.Fatalf("Relayed = %d, Sampled = %d, want %d", res.Relayed, res.Sampled, chunks)
	}
	if got := SampleText(res.Sample); got != "Hello world" {
		t.Fatalf("text of the sample = %q", got)
	}
	// The chunks themselves went out whole.
	if !strings.Contains(rec.Body.String(), `"system_fingerprint":"fp"`) {
		t.Fatalf("relayed body lost a member: %s", rec.Body.String())
	}
}

// Start must stop at the first event, so that the caller can return up
// its call chain before the rest of the stream; Rest relays the others.
func TestStartStopsAtTheFirstEventAndRestRelaysTheOthers(t *testing.T) {
	rec := httptest.NewRecorder()
	f := &fakeStream{chunks: chunks(), err: io.EOF}
	r := Start(rec, f, Options{IncludeUsage: true})
	if r.Err() != nil || r.Ended() {
		t.Fatalf("Start: err %v ended %v", r.Err(), r.Ended())
	}
	if res := r.Result(); !res.Started || res.Chunks != 1 || res.FirstChunk.IsZero() {
		t.Fatalf("after Start: %+v", res)
	}
	if got, want := rec.Body.String(), "data: {\"n\":1}\n\n"; got != want {
		t.Fatalf("after Start the client has %q, want %q", got, want)
	}
	if len(f.chunks) != 2 {
		t.Fatalf("Start read %d chunks past the first", 2-len(f.chunks))
	}
	err := r.Rest()
	res := r.Result()
	if err != nil || !res.Done || res.Chunks != 3 || !res.HasUsage {
		t.Fatalf("Rest: %+v, %v", res, err)
	}
	want := "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: {\"choices\":[],\"usage\":{}}\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want || !rec.Flushed {
		t.Fatalf("body %q flushed %v, want %q", rec.Body.String(), rec.Flushed, want)
	}
}

// A failure before the first event ends Start with nothing written, so
// the caller can still answer with a status or try elsewhere; Rest then
// returns the same failure at once.
func TestStartFailureBeforeTheFirstEventWritesNothing(t *testing.T) {
	rec := httptest.NewRecorder()
	boom := &llm.Error{Kind: llm.KindUpstreamStatus, Status: 503, Message: "down"}
	r := Start(rec, &fakeStream{err: boom}, Options{})
	if !errors.Is(r.Err(), boom) || !r.Ended() || r.Result().Started {
		t.Fatalf("err %v ended %v started %v", r.Err(), r.Ended(), r.Result().Started)
	}
	if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Fatalf("wrote %q before any chunk", rec.Body.String())
	}
	if err := r.Rest(); !errors.Is(err, boom) || r.Result().Started {
		t.Fatalf("Rest after a failed Start: %+v, %v", r.Result(), err)
	}
}

// Flush sends what Start wrote without reading on; Rest goes on after it.
func TestFlushSendsTheFirstEventAndRestGoesOn(t *testing.T) {
	rec := httptest.NewRecorder()
	f := &fakeStream{chunks: chunks(), err: io.EOF}
	r := Start(rec, f, Options{})
	if rec.Flushed {
		t.Fatal("Start flushed: Flush would have nothing to do")
	}
	r.Flush()
	if !rec.Flushed || r.Ended() || len(f.chunks) != 2 {
		t.Fatalf("after Flush: flushed %v ended %v, %d chunks left", rec.Flushed, r.Ended(), len(f.chunks))
	}
	if err := r.Rest(); err != nil || !r.Result().Done || r.Result().Chunks != 2 {
		t.Fatalf("Rest after Flush: %+v, %v", r.Result(), err)
	}
}

// TestRelayPutsTheCostInTheUsage: the usage chunk carries the price,
// at the slot the adapter found when it has one, and found by a walk
// when not.
func TestRelayPutsTheCostInTheUsage(t *testing.T) {
	data := []byte(`{"choices":[],"usage":{"total_tokens":7,"cost":0}}`)
	_, _, slot, err := llm.CheckUsage(data)
	if err != nil || slot.End == 0 {
		t.Fatalf("CheckUsage: %+v, %v", slot, err)
	}
	for _, tc := range []struct {
		name string
		slot llm.UsageSlot
	}{{"found by the adapter", slot}, {"not found", llm.UsageSlot{}}} {
		rec := httptest.NewRecorder()
		c := llm.Chunk{Data: data, Usage: &usage, UsageSlot: tc.slot}
		_, err := Relay(rec, &fakeStream{chunks: []llm.Chunk{c}, err: io.EOF},
			Options{IncludeUsage: true, UsageCost: func(u llm.Usage) string { return "0.00" + strconv.Itoa(u.TotalTokens) }})
		if err != nil {
			t.Fatal(err)
		}
		want := "data: {\"choices\":[],\"usage\":{\"total_tokens\":7,\"cost\":0.007}}\n\ndata: [DONE]\n\n"
		if rec.Body.String() != want {
			t.Errorf("%s: body\n%q\nwant\n%q", tc.name, rec.Body.String(), want)
		}
	}
}

// TestStartHeaderNames checks that the names start stores directly are
// the canonical forms net/http writes and looks up, and that an Add to
// one of its values leaves the others alone.
func TestStartHeaderNames(t *testing.T) {
	for _, n := range []string{hdrContentType, hdrCacheControl, hdrAccelBuffering} {
		if c := http.CanonicalHeaderKey(n); c != n {
			t.Errorf("%q is stored directly but its canonical form is %q", n, c)
		}
	}
	w := httptest.NewRecorder()
	(&Relayer{w: w}).start()
	w.Header().Add("cache-control", "no-store")
	want := http.Header{
		"Content-Type":      {"text/event-stream; charset=utf-8"},
		"Cache-Control":     {"no-cache", "no-store"},
		"X-Accel-Buffering": {"no"},
	}
	if !reflect.DeepEqual(w.Header(), want) {
		t.Fatalf("headers after start and an Add: %v, want %v", w.Header(), want)
	}
	if w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
}

// lineRecorder takes header lines as gatehouse's engine does
// (h1.FieldWriter), in a buffer of its own whose room FieldBuffer
// lends: lines handed over after WriteHeader are dropped.
type lineRecorder struct {
	*httptest.ResponseRecorder
	lines []byte
	typed bool
	wrote bool
}

func (l *lineRecorder) WriteHeader(code int) {
	l.wrote = true
	l.ResponseRecorder.WriteHeader(code)
}

func (l *lineRecorder) Write(p []byte) (int, error) {
	l.wrote = true
	return l.ResponseRecorder.Write(p)
}

func (l *lineRecorder) FieldBuffer() []byte { return l.lines[len(l.lines):] }

func (l *lineRecorder) AppendFields(lines []byte, typed bool) {
	if !l.wrote {
		l.lines = append(l.lines, lines...)
		l.typed = l.typed || typed
	}
}

// unwrapper hides a writer's methods but Unwrap, as the server's body
// capture does.
type unwrapper struct{ http.ResponseWriter }

func (u unwrapper) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// TestStartFieldLines: on a writer that takes lines (found behind an
// Unwrap), the caller's fields and the stream's own go out as lines
// with the first event, typed, and the map stays empty; a stream that
// fails before its first event hands over nothing, so the caller's
// fields of a failed attempt never reach the client.
func TestStartFieldLines(t *testing.T) {
	const callerLines = "X-Caller: 1\r\nX-Other: two\r\n"
	t.Run("started", func(t *testing.T) {
		l := &lineRecorder{ResponseRecorder: httptest.NewRecorder(), lines: make([]byte, 0, 512)}
		fields := append(l.FieldBuffer(), callerLines...)
		res, err := Relay(unwrapper{l}, &fakeStream{chunks: chunks(), err: io.EOF}, Options{Fields: fields})
		if err != nil || !res.Started {
			t.Fatalf("relay: %v, started %v", err, res.Started)
		}
		want := callerLines + "Content-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n"
		if string(l.lines) != want || !l.typed {
			t.Errorf("lines %q (typed %v), want %q typed", l.lines, l.typed, want)
		}
		if len(l.HeaderMap) != 0 {
			t.Errorf("the map holds %v", l.HeaderMap)
		}
	})
	t.Run("no caller fields", func(t *testing.T) {
		l := &lineRecorder{ResponseRecorder: httptest.NewRecorder()}
		if _, err := Relay(l, &fakeStream{chunks: chunks(), err: io.EOF}, Options{}); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(l.lines), "Content-Type: text/event-stream") || len(l.HeaderMap) != 0 {
			t.Errorf("lines %q, map %v", l.lines, l.HeaderMap)
		}
	})
	t.Run("failed before the first event", func(t *testing.T) {
		l := &lineRecorder{ResponseRecorder: httptest.NewRecorder(), lines: make([]byte, 0, 512)}
		fields := append(l.FieldBuffer(), callerLines...)
		broken := errors.New("broken")
		res, err := Relay(l, &fakeStream{err: broken}, Options{Fields: fields})
		if err != broken || res.Started {
			t.Fatalf("relay: %v, started %v", err, res.Started)
		}
		if len(l.lines) != 0 || l.wrote {
			t.Errorf("handed over %q before any event", l.lines)
		}
	})
}
