package cache

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"

	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
)

// Entry is a stored answer: the backend's OpenAI-shaped response as the
// gateway received it, before any re-encoding for the client's dialect.
// Exactly one of Completion and Chunks is set: a whole answer keeps its
// body, a stream its events, each with the boundaries it arrived with.
type Entry struct {
	Project    string
	Completion []byte      // a chat.completion body
	Chunks     []llm.Chunk // a stream's chunks in order, the usage chunk included
	Usage      llm.Usage
	// Cost is what the answer cost when it was fetched: what a hit saves.
	Cost        limit.Micros
	ServedModel string
	Provider    string
	Deployment  string
	Expires     time.Time
}

// Size is what the entry counts against the cache's byte bound.
func (e *Entry) Size() int64 {
	n := int64(len(e.Completion) + len(e.Project) + len(e.ServedModel) + len(e.Provider) + len(e.Deployment) + 256)
	for _, c := range e.Chunks {
		n += int64(len(c.Data)) + 48
	}
	return n
}

// Body returns the answer as a chat.completion body: the stored one, or
// one assembled from the stored stream's chunks.
func (e *Entry) Body() ([]byte, error) {
	if e.Completion != nil {
		return e.Completion, nil
	}
	return assemble(e.Chunks)
}

// Stream returns the answer as a stream: the stored chunks, or chunks cut
// from the stored body (a role-and-content chunk, a tool-call chunk and
// a finish chunk per choice, then the usage chunk).
func (e *Entry) Stream() (llm.Stream, error) {
	chunks := e.Chunks
	if chunks == nil {
		var err error
		if chunks, err = split(e.Completion); err != nil {
			return nil, err
		}
	}
	return &replay{chunks: chunks}, nil
}

// replay is an llm.Stream over stored chunks.
type replay struct {
	chunks []llm.Chunk
	next   int
}

func (r *replay) Next() (llm.Chunk, error) {
	if r.next == len(r.chunks) {
		return llm.Chunk{}, io.EOF
	}
	c := r.chunks[r.next]
	r.next++
	return c, nil
}

func (r *replay) Close() error { return nil }

// Pending says the next chunk is at hand, so the relay writes a replay
// with as few flushes as it can while keeping each event whole.
func (r *replay) Pending() bool { return r.next < len(r.chunks) }

// choiceAcc gathers one choice's deltas.
type choiceAcc struct {
	content, reasoning, refusal strings.Builder
	hasContent, hasRefusal      bool
	signature                   string
	tools                       []llm.ToolCallJSON
	toolAt                      map[int]int // delta index → tools index
	finish                      string
	logprobs                    json.RawMessage
}

// assemble builds the chat.completion a stream's chunks add up to.
func assemble(chunks []llm.Chunk) ([]byte, error) {
	var out llm.ChatCompletion
	var accs []*choiceAcc
	byIndex := map[int]*choiceAcc{}
	for i, c := range chunks {
		var ch llm.ChatChunk
		if err := json.Unmarshal(c.Data, &ch); err != nil {
			return nil, err
		}
		if i == 0 || out.ID == "" {
			out.ID, out.Created, out.Model = ch.ID, ch.Created, ch.Model
		}
		if ch.SystemFingerprint != "" {
			out.SystemFingerprint = ch.SystemFingerprint
		}
		if ch.Usage != nil {
			out.Usage = ch.Usage
		}
		for _, cc := range ch.Choices {
			a := byIndex[cc.Index]
			if a == nil {
				a = &choiceAcc{toolAt: map[int]int{}}
				byIndex[cc.Index] = a
				accs = append(accs, a)
				out.Choices = append(out.Choices, llm.Choice{Index: cc.Index})
			}
			d := cc.Delta
			if d.Content != nil {
				a.content.WriteString(*d.Content)
				a.hasContent = true
			}
			if d.Refusal != nil {
				a.refusal.WriteString(*d.Refusal)
				a.hasRefusal = true
			}
			a.reasoning.WriteString(d.ReasoningContent)
			if d.ReasoningSignature != "" {
				a.signature = d.ReasoningSignature
			}
			for _, t := range d.ToolCalls {
				at, ok := a.toolAt[t.Index]
				if !ok {
					at = len(a.tools)
					a.toolAt[t.Index] = at
					a.tools = append(a.tools, llm.ToolCallJSON{Type: "function"})
				}
				tc := &a.tools[at]
				if t.ID != "" {
					tc.ID = t.ID
				}
				if t.Type != "" {
					tc.Type = t.Type
				}
				tc.Function.Name += t.Function.Name
				tc.Function.Arguments += t.Function.Arguments
			}
			if cc.FinishReason != nil && *cc.FinishReason != "" {
				a.finish = *cc.FinishReason
			}
			if len(cc.Logprobs) > 0 && string(cc.Logprobs) != "null" {
				a.logprobs = cc.Logprobs
			}
		}
	}
	if out.ID == "" && len(chunks) == 0 {
		return nil, errors.New("cache: an empty stream")
	}
	for i, a := range accs {
		m := llm.ResponseMessage{Role: llm.RoleAssistant, ToolCalls: a.tools,
			ReasoningContent: a.reasoning.String(), ReasoningSignature: a.signature}
		if a.hasContent || len(a.tools) == 0 {
			m.Content = llm.Str(a.content.String())
		}
		if a.hasRefusal {
			m.Refusal = llm.Str(a.refusal.String())
		}
		out.Choices[i].Message = m
		out.Choices[i].FinishReason = a.finish
		out.Choices[i].Logprobs = a.logprobs
	}
	c, err := llm.NewCompletion(&out)
	if err != nil {
		return nil, err
	}
	return c.Body, nil
}

// split cuts a chat.completion into the chunks a stream of it would
// have carried.
func split(body []byte) ([]llm.Chunk, error) {
	var c llm.ChatCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, err
	}
	var out []llm.Chunk
	emit := func(choices []llm.ChunkChoice, usage *llm.WireUsage) error {
		ch, err := llm.EncodeChunk(&llm.ChatChunk{ID: c.ID, Created: c.Created, Model: c.Model,
			SystemFingerprint: c.SystemFingerprint, Choices: choices, Usage: usage})
		if err == nil {
			out = append(out, ch)
		}
		return err
	}
	for _, ch := range c.Choices {
		m := ch.Message
		content := m.Content
		if content == nil && len(m.ToolCalls) == 0 {
			content = llm.Str("")
		}
		first := llm.Delta{Role: llm.RoleAssistant, Content: content, Refusal: m.Refusal,
			ReasoningContent: m.ReasoningContent, ReasoningSignature: m.ReasoningSignature}
		if err := emit([]llm.ChunkChoice{{Index: ch.Index, Delta: first, Logprobs: ch.Logprobs}}, nil); err != nil {
			return nil, err
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]llm.ToolCallDelta, len(m.ToolCalls))
			for i, t := range m.ToolCalls {
				calls[i] = llm.ToolCallDelta{Index: i, ID: t.ID, Type: t.Type,
					Function: llm.FunctionCallDelta{Name: t.Function.Name, Arguments: t.Function.Arguments}}
			}
			if err := emit([]llm.ChunkChoice{{Index: ch.Index, Delta: llm.Delta{ToolCalls: calls}}}, nil); err != nil {
				return nil, err
			}
		}
		finish := ch.FinishReason
		if err := emit([]llm.ChunkChoice{{Index: ch.Index, FinishReason: &finish}}, nil); err != nil {
			return nil, err
		}
	}
	if c.Usage != nil {
		if err := emit(nil, c.Usage); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Recorder passes a stream through and keeps a copy of its chunks, up to
// a size bound, for storing once the stream has completed.
type Recorder struct {
	llm.Stream
	max      int64
	size     int64
	chunks   []llm.Chunk
	complete bool
	over     bool
}

// NewRecorder records s, giving up (but still passing s through) once
// its chunks exceed max bytes.
func NewRecorder(s llm.Stream, max int64) *Recorder {
	return &Recorder{Stream: s, max: max}
}

// Next implements llm.Stream.
func (r *Recorder) Next() (llm.Chunk, error) {
	c, err := r.Stream.Next()
	switch {
	case err == io.EOF:
		r.complete = true
	case err != nil || r.over:
	default:
		r.size += int64(len(c.Data)) + 48
		if r.size > r.max {
			r.over, r.chunks = true, nil
			break
		}
		kept := llm.Chunk{Data: append([]byte(nil), c.Data...), UsageOnly: c.UsageOnly}
		if c.Usage != nil {
			u := *c.Usage
			kept.Usage = &u
		}
		r.chunks = append(r.chunks, kept)
	}
	return c, err
}

// Pending passes the recorded stream's Pending through.
func (r *Recorder) Pending() bool {
	p, ok := r.Stream.(llm.Pending)
	return ok && p.Pending()
}

// Chunks returns the recorded chunks, and false unless the stream ran to
// its end within the size bound: a cut-off stream is never stored.
func (r *Recorder) Chunks() ([]llm.Chunk, bool) {
	return r.chunks, r.complete && !r.over && len(r.chunks) > 0
}
