// Package stream relays a streamed completion to the client as
// server-sent events: each chunk is written and flushed the moment it
// arrives (chunks that arrived together are flushed together), usage is
// teed off for accounting, and a failure after the first byte becomes a
// final error event instead of a hang.
//
// It depends on llm only; it never imports a store or a provider.
package stream

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"gatehouse/internal/h1"
	"gatehouse/internal/llm"
)

// Options tune one relay.
type Options struct {
	// OnChunk, when set, runs after every chunk read from upstream (the
	// caller restarts its idle deadline there).
	OnChunk func()
	// Classify turns a stream failure into the error the client reads
	// (a timeout, a broken upstream …); nil uses llm.AsError.
	Classify func(error) *llm.Error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Encoder writes the client's wire format; nil relays the OpenAI
	// chunks as they are (data: {…} events closed by data: [DONE]).
	Encoder Encoder
	// UsageCost, when set, prices the usage of the chunk that reports it,
	// and the price goes into that chunk's usage object as "cost" (OpenAI
	// chunks only: an Encoder writes its own usage).
	UsageCost func(llm.Usage) string
	// Fields are header lines the caller formatted ("Name: value\r\n"
	// each, trusted as h1.FieldWriter's lines are) for a writer that takes
	// lines, in the room its FieldBuffer gave: they go out with the
	// stream's own fields when the first event does, and not at all if
	// the stream fails before it (so a failed attempt's fields never
	// reach the client, and the next attempt's or the error's are not
	// sent next to them). Ignored by a writer that takes no lines; the
	// caller then sets its fields in the map.
	Fields []byte
	// IncludeUsage forwards the trailing usage chunk; when false the
	// gateway still reads usage from it but the client never sees it.
	IncludeUsage bool
}

// Encoder turns upstream chunks into another SSE dialect (Anthropic's
// Messages events). Each method appends to b the bytes to write now; the
// relay writes and flushes them at once, so an encoder that returns what
// a chunk caused keeps the stream unbuffered.
type Encoder interface {
	// Chunk appends the events one chunk causes (possibly none). An error
	// breaks the stream like an upstream failure.
	Chunk(b []byte, c llm.Chunk) ([]byte, error)
	// End appends what closes a stream that completed.
	End(b []byte) []byte
	// Error appends the event that reports a failure after the start.
	Error(b []byte, e *llm.Error) []byte
}

// Result says what a relay delivered.
//
// (The flags are side by side, as are Options' and Relayer's: a relay is
// held for as long as its stream runs, and TestRelayerSizeClass keeps it
// in its size class.)
type Result struct {
	Usage      llm.Usage
	Chunks     int       // chunks written to the client
	FirstChunk time.Time // when the first chunk was written; zero if none
	HasUsage   bool
	Started    bool // the response headers went out
	Done       bool // the stream completed and [DONE] was sent
	// Sample holds the text of the first chunks relayed, up to about
	// SampleBytes: each choice's content, refusal, reasoning and tool-call
	// names and arguments, as the raw JSON strings the chunks carried
	// them in, one a line (SampleText decodes it). It is what the
	// completion tokens of a stream that ended without usage are counted
	// from. Sampled is the size of the chunks it was taken from and
	// Relayed that of all chunks relayed, each chunk counted from its
	// choices on (the id, model and fingerprint every chunk repeats are
	// left out), so a count of a sample that is only the start scales
	// up by Relayed/Sampled.
	Sample  []byte
	Sampled int
	Relayed int
}

// SampleBytes bounds Result.Sample: a stream's count is exact up to
// about this much text, extrapolated beyond, and a stream holds no more
// than this for it.
const SampleBytes = 16 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

var (
	doneEvent = []byte("data: [DONE]\n\n")
)

// Relay copies s to w. Until the first chunk arrives nothing is written
// (with an Encoder: until it first has something to write):
// an error then is returned with Result.Started false, so the caller can
// still answer with a proper status (or try another deployment). Once
// started, an upstream failure is sent as a final `data: {"error":…}`
// event and returned; a client that goes away ends the relay with its
// write error.
//
// It is Start followed by Rest; a caller that must answer a failure before
// the first byte deep in its call chain, but would rather not hold that
// chain's stack through a stream's long waits, calls the two itself.
func Relay(w http.ResponseWriter, s llm.Stream, opt Options) (Result, error) {
	r := Start(w, s, opt)
	err := r.Rest()
	return *r.Result(), err
}

// Relayer is one relay in progress: Start sends the first event and
// returns, Rest relays the others. Between the two the relay holds only
// this struct (no goroutine, no buffer), so the caller may return up its
// call chain before the long part of the stream and keep a short stack
// while it waits for events.
type Relayer struct {
	w       http.ResponseWriter
	s       llm.Stream
	opt     Options
	rc      *http.ResponseController
	pending llm.Pending
	res     Result
	err     error
	ended   bool
	dirty   bool // written but not flushed
	// bp is the event buffer, taken from the pool only while an event is
	// built and written, never while the relay waits for the next one: a
	// stream spends nearly all its life waiting, and ten thousand open
	// streams would otherwise hold ten thousand idle buffers.
	bp *[]byte
}

// Start relays s to w until the first event has been written (not yet
// flushed: Rest flushes it before it waits, with whatever else was already
// buffered), the stream ended, or it failed. A failure before the first
// event leaves w untouched: Err returns it and Result().Started is false.
func Start(w http.ResponseWriter, s llm.Stream, opt Options) *Relayer {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	r := &Relayer{w: w, s: s, opt: opt, rc: http.NewResponseController(w)}
	r.pending, _ = s.(llm.Pending)
	for !r.ended && !r.res.Started {
		r.step()
	}
	r.release()
	return r
}

// Rest relays the events after the first until the stream ends, and
// returns why it failed, if it did (Result says what it delivered). After
// a failed or ended Start it returns at once.
func (r *Relayer) Rest() error {
	for !r.ended {
		r.step()
	}
	r.release()
	return r.err
}

// Flush sends what Start wrote (the response headers and the first
// event) now; Rest would send it before its first wait. Writing the
// headers is the deepest thing a relay does (net/http's header writer has
// a frame of nearly 3 KB, and sorts the fields), so a caller that keeps
// its stack short calls Flush from as high up its chain as it can. A
// failure ends the relay: Rest then returns it.
func (r *Relayer) Flush() {
	if r.ended || !r.dirty {
		return
	}
	if err := r.rc.Flush(); err != nil {
		r.end(err)
		return
	}
	r.dirty = false
}

// Result is what the relay has delivered so far. It points into the
// relay (no copy on a stack that waits for a stream's end).
func (r *Relayer) Result() *Result { return &r.res }

// Err is why the relay ended, if it failed; nil while it runs and after a
// stream that completed.
func (r *Relayer) Err() error { return r.err }

// Ended reports whether the relay is over (completed or failed).
func (r *Relayer) Ended() bool { return r.ended }

func (r *Relayer) release() {
	if r.bp != nil && cap(*r.bp) <= 64<<10 {
		bufPool.Put(r.bp)
	}
	r.bp = nil
}

func (r *Relayer) buf() *[]byte {
	if r.bp == nil {
		r.bp = bufPool.Get().(*[]byte)
	}
	return r.bp
}

// end stops the relay with err (nil: completed).
func (r *Relayer) end(err error) {
	r.ended, r.err = true, err
}

// step waits for the next chunk and relays it; the stream's end or a
// failure ends the relay.
func (r *Relayer) step() {
	w, opt, res := r.w, &r.opt, &r.res
	// Flush before waiting on the network; when the next chunk is
	// already buffered, it goes out in the same flush.
	if r.dirty && (r.pending == nil || !r.pending.Pending()) {
		if err := r.rc.Flush(); err != nil {
			r.end(err)
			return
		}
		r.dirty = false
	}
	r.release()
	c, err := r.s.Next()
	if opt.OnChunk != nil && err == nil {
		opt.OnChunk()
	}
	if err != nil {
		if err == io.EOF {
			if !res.Started {
				r.start()
				res.Started = true
			}
			end := doneEvent
			if opt.Encoder != nil {
				bp := r.buf()
				end = opt.Encoder.End((*bp)[:0])
				*bp = end
			}
			if _, werr := w.Write(end); werr != nil {
				r.end(werr)
				return
			}
			res.Done = true
			r.end(r.rc.Flush())
			return
		}
		if res.Started {
			writeError(w, r.rc, r.opt, classify(r.opt, err))
		}
		r.end(err)
		return
	}
	if c.Usage != nil {
		res.Usage, res.HasUsage = *c.Usage, true
	}
	bp := r.buf()
	if opt.Encoder != nil {
		out, err := opt.Encoder.Chunk((*bp)[:0], c)
		*bp = out
		if err != nil {
			if res.Started {
				writeError(w, r.rc, r.opt, classify(r.opt, err))
			}
			r.end(err)
			return
		}
		if len(out) == 0 {
			return
		}
	} else {
		if c.UsageOnly && !opt.IncludeUsage {
			return
		}
		data := c.Data
		if c.Usage != nil && opt.UsageCost != nil {
			if c.UsageSlot.End > 0 { // the adapter found it: no walk again
				data = llm.SetUsageCostAt(data, c.UsageSlot, opt.UsageCost(*c.Usage))
			} else {
				data, _ = llm.SetUsageCost(data, opt.UsageCost(*c.Usage))
			}
		}
		*bp = llm.AppendEvent((*bp)[:0], "", data)
	}
	if !res.Started {
		r.start()
		res.Started = true
		res.FirstChunk = opt.Now()
	}
	if _, err := w.Write(*bp); err != nil {
		r.end(err)
		return
	}
	res.Chunks++
	if !c.UsageOnly { // what the client was sent, for counting if no usage comes
		// Only the text is kept, not the chunk: a stream waits most
		// of its life, and what it holds meanwhile is what ten
		// thousand open streams cost.
		choices := choicesOf(c.Data)
		size := len(choices) + 2
		if len(res.Sample) < SampleBytes {
			res.Sample = appendChoicesText(res.Sample, choices)
			res.Sampled += size
		}
		res.Relayed += size
	}
	r.dirty = true
}

// choicesKey starts the member a chunk's text is in. Both quotes
// unescaped and a colon after them: inside a JSON string the quotes
// would be escaped, so only a key matches.
const choicesKey = `"choices":`

// choicesOf returns the chunk from its "choices" member to its end (so
// that '{' before it is an object again), or the whole chunk when it has
// none where expected. It searches, it does not decode: it runs for every
// chunk.
func choicesOf(data []byte) []byte {
	i := bytes.Index(data, []byte(choicesKey))
	if i < 0 {
		return data[min(1, len(data)):] // the '{' goes back on
	}
	return data[i:]
}

func classify(opt Options, err error) *llm.Error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &llm.Error{Kind: llm.KindUpstreamProtocol, Status: http.StatusBadGateway, Type: "server_error",
			Code: "upstream_stream_broken", Message: "the upstream stream ended unexpectedly", Cause: err}
	}
	if opt.Classify != nil {
		return opt.Classify(err)
	}
	return llm.AsError(err)
}

// start sends the stream's status and headers: the caller's fields
// (Options.Fields) and the stream's own as lines to a writer that takes
// them, in the map otherwise.
func (r *Relayer) start() {
	if fw := h1.FieldWriterOf(r.w); fw != nil {
		b := r.opt.Fields
		if b == nil {
			b = fw.FieldBuffer()
		}
		fw.AppendFields(append(b, streamFields...), true)
		r.opt.Fields = nil // the connection's buffer: not held for the stream's life
	} else {
		setStreamHeader(r.w.Header())
	}
	r.w.WriteHeader(http.StatusOK)
}

// streamFields are the stream's own header fields as lines.
const streamFields = hdrContentType + ": text/event-stream; charset=utf-8\r\n" +
	hdrCacheControl + ": no-cache\r\n" +
	hdrAccelBuffering + ": no\r\n" // tell nginx-style proxies not to buffer

// setStreamHeader puts the stream's own fields in h. The names are
// stored as they are, already canonical (TestStartHeaderNames), and the
// three values share one allocation; each slice is full, so an Add
// elsewhere appends to a copy.
func setStreamHeader(h http.Header) {
	vals := []string{"text/event-stream; charset=utf-8", "no-cache", "no"}
	h[hdrContentType] = vals[0:1:1]
	h[hdrCacheControl] = vals[1:2:2]
	h[hdrAccelBuffering] = vals[2:3:3] // tell nginx-style proxies not to buffer
}

// The stream's header names, in canonical form.
const (
	hdrContentType    = "Content-Type"
	hdrCacheControl   = "Cache-Control"
	hdrAccelBuffering = "X-Accel-Buffering"
)

// writeError sends the failure as the stream's last event, in the shape
// the dialect uses for errors inside a stream, so SDKs raise it.
func writeError(w http.ResponseWriter, rc *http.ResponseController, opt Options, e *llm.Error) {
	var b []byte
	if opt.Encoder != nil {
		b = opt.Encoder.Error(nil, e)
	} else {
		b = llm.AppendEvent(nil, "", e.AppendOpenAI(nil))
	}
	_, _ = w.Write(b)
	_ = rc.Flush()
}
