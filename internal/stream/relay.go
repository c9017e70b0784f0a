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

	"gatehouse/internal/llm"
)

// Options tune one relay.
type Options struct {
	// IncludeUsage forwards the trailing usage chunk; when false the
	// gateway still reads usage from it but the client never sees it.
	IncludeUsage bool
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
type Result struct {
	Usage      llm.Usage
	HasUsage   bool
	Chunks     int       // chunks written to the client
	FirstChunk time.Time // when the first chunk was written; zero if none
	Started    bool      // the response headers went out
	Done       bool      // the stream completed and [DONE] was sent
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
func Relay(w http.ResponseWriter, s llm.Stream, opt Options) (Result, error) {
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	var res Result
	rc := http.NewResponseController(w)
	// The event buffer is taken from the pool only while an event is
	// built and written, never while the relay waits for the next one:
	// a stream spends nearly all its life waiting, and ten thousand open
	// streams would otherwise hold ten thousand idle buffers.
	var bp *[]byte
	release := func() {
		if bp != nil && cap(*bp) <= 64<<10 {
			bufPool.Put(bp)
		}
		bp = nil
	}
	defer release()
	buf := func() *[]byte {
		if bp == nil {
			bp = bufPool.Get().(*[]byte)
		}
		return bp
	}
	pending, _ := s.(llm.Pending)
	dirty := false // written but not flushed
	for {
		// Flush before waiting on the network; when the next chunk is
		// already buffered, it goes out in the same flush.
		if dirty && (pending == nil || !pending.Pending()) {
			if err := rc.Flush(); err != nil {
				return res, err
			}
			dirty = false
		}
		release()
		c, err := s.Next()
		if opt.OnChunk != nil && err == nil {
			opt.OnChunk()
		}
		if err != nil {
			if err == io.EOF {
				if !res.Started {
					start(w)
					res.Started = true
				}
				end := doneEvent
				if opt.Encoder != nil {
					bp := buf()
					end = opt.Encoder.End((*bp)[:0])
					*bp = end
				}
				if _, werr := w.Write(end); werr != nil {
					return res, werr
				}
				res.Done = true
				return res, rc.Flush()
			}
			if !res.Started {
				return res, err
			}
			writeError(w, rc, opt, classify(opt, err))
			return res, err
		}
		if c.Usage != nil {
			res.Usage, res.HasUsage = *c.Usage, true
		}
		bp := buf()
		if opt.Encoder != nil {
			out, err := opt.Encoder.Chunk((*bp)[:0], c)
			*bp = out
			if err != nil {
				if !res.Started {
					return res, err
				}
				writeError(w, rc, opt, classify(opt, err))
				return res, err
			}
			if len(out) == 0 {
				continue
			}
		} else {
			if c.UsageOnly && !opt.IncludeUsage {
				continue
			}
			data := c.Data
			if c.Usage != nil && opt.UsageCost != nil {
				data, _ = llm.SetUsageCost(data, opt.UsageCost(*c.Usage))
			}
			*bp = llm.AppendEvent((*bp)[:0], "", data)
		}
		if !res.Started {
			start(w)
			res.Started = true
			res.FirstChunk = now()
		}
		if _, err := w.Write(*bp); err != nil {
			return res, err
		}
		res.Chunks++
		if !c.UsageOnly { // what the client was sent, for counting if no usage comes
			// Only the text is kept, not the chunk: a stream waits most
			// of its life, and what it holds meanwhile is what ten
			// thousand open streams cost.
			size := len(choicesOf(c.Data)) + 2
			if len(res.Sample) < SampleBytes {
				res.Sample = appendText(res.Sample, c.Data)
				res.Sampled += size
			}
			res.Relayed += size
		}
		dirty = true
	}
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

func start(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell nginx-style proxies not to buffer
	w.WriteHeader(http.StatusOK)
}

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
