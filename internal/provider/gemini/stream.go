package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// Stream translates streamGenerateContent?alt=sse. Every event is a whole
// GenerateContentResponse holding the next piece of each candidate: text
// becomes content deltas, thought text reasoning deltas, and each
// functionCall (Gemini sends calls whole, never in pieces) one tool-call
// delta with its id, name and complete arguments. Gemini repeats
// usageMetadata on every event, growing; the last one is the call's usage
// and goes out once, on a trailing chunk with no choices.
func (Adapter) Stream(resp *http.Response, d *provider.Deployment, _ *llm.ChatRequest) (llm.Stream, error) {
	s := &stream{sse: llm.NewReader(resp.Body), d: d, created: time.Now().Unix(), choices: map[int]*choiceState{}}
	return &provider.ChunkStream{Body: resp.Body, Decode: s.decode}, nil
}

type stream struct {
	sse      *llm.Reader
	d        *provider.Deployment
	id       string
	model    string
	created  int64
	ids      *callIDs
	choices  map[int]*choiceState
	usage    *usageMetadata
	finished bool // a candidate finished, or the prompt was blocked
	ended    bool
}

// choiceState is what the stream remembers of one candidate.
type choiceState struct {
	roleSent  bool
	calls     int // tool calls so far: the index of the next one
	signature bool
}

// decode reads one event and emits its chunks.
func (s *stream) decode(emit func(*llm.ChatChunk)) error {
	if s.ended {
		return io.EOF
	}
	ev, err := s.sse.Next()
	if errors.Is(err, io.EOF) {
		if !s.finished {
			// The stream stopped before any candidate said why: cut off.
			return io.ErrUnexpectedEOF
		}
		s.ended = true
		if s.usage != nil {
			emit(&llm.ChatChunk{ID: s.id, Created: s.created, Model: s.model, Choices: []llm.ChunkChoice{}, Usage: s.usage.usage().Wire()})
		}
		return io.EOF
	}
	if err != nil {
		return err
	}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return nil
	}
	var g generateResponse
	if err := json.Unmarshal(data, &g); err != nil {
		return provider.ProtocolError(s.d.Provider, "a malformed stream event", err)
	}
	if g.Error != nil {
		return g.Error.gatewayError(s.d.Provider, 0, nil)
	}
	s.event(&g, emit)
	return nil
}

func (s *stream) event(g *generateResponse, emit func(*llm.ChatChunk)) {
	if s.ids == nil {
		s.id, s.model = completionID(g.ResponseID), modelName(g, s.d)
		s.ids = newCallIDs(g.ResponseID)
	}
	if g.UsageMetadata != nil {
		s.usage = g.UsageMetadata
	}
	chunk := func(c llm.ChunkChoice) {
		emit(&llm.ChatChunk{ID: s.id, Created: s.created, Model: s.model, Choices: []llm.ChunkChoice{c}})
	}
	if len(g.Candidates) == 0 && g.PromptFeedback != nil && g.PromptFeedback.BlockReason != "" && !s.finished {
		s.finished = true
		chunk(llm.ChunkChoice{Delta: llm.Delta{Role: llm.RoleAssistant}, FinishReason: llm.Str(llm.FinishContentFilter)})
		return
	}
	sort.SliceStable(g.Candidates, func(i, j int) bool { return g.Candidates[i].Index < g.Candidates[j].Index })
	for i := range g.Candidates {
		c := &g.Candidates[i]
		st := s.choices[c.Index]
		if st == nil {
			st = &choiceState{}
			s.choices[c.Index] = st
		}
		if delta, ok := s.delta(c, st); ok {
			chunk(llm.ChunkChoice{Index: c.Index, Delta: delta})
		}
		if c.FinishReason != "" {
			s.finished = true
			var d llm.Delta
			if !st.roleSent {
				d.Role, st.roleSent = llm.RoleAssistant, true
			}
			chunk(llm.ChunkChoice{Index: c.Index, Delta: d, FinishReason: llm.Str(finishReason(c.FinishReason, st.calls > 0))})
		}
	}
}

// delta is what candidate c adds to its message; false when nothing.
func (s *stream) delta(c *candidate, st *choiceState) (llm.Delta, bool) {
	var d llm.Delta
	var text []byte
	hasText := false
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			if p.ThoughtSignature != "" && !st.signature {
				d.ReasoningSignature, st.signature = p.ThoughtSignature, true
			}
			switch {
			case p.FunctionCall != nil:
				d.ToolCalls = append(d.ToolCalls, llm.ToolCallDelta{Index: st.calls, ID: s.ids.next(p.FunctionCall.ID), Type: "function",
					Function: llm.FunctionCallDelta{Name: p.FunctionCall.Name, Arguments: arguments(p.FunctionCall.Args)}})
				st.calls++
			case p.Text != nil && p.Thought:
				d.ReasoningContent += *p.Text
			case p.Text != nil && *p.Text != "":
				text = append(text, *p.Text...)
				hasText = true
			}
		}
	}
	if hasText {
		d.Content = llm.Str(string(text))
	}
	if !st.roleSent {
		// OpenAI's first chunk names the role and starts the content.
		d.Role, st.roleSent = llm.RoleAssistant, true
		if d.Content == nil && len(d.ToolCalls) == 0 {
			d.Content = llm.Str("")
		}
		return d, true
	}
	return d, hasText || d.ReasoningContent != "" || d.ReasoningSignature != "" || len(d.ToolCalls) > 0
}
