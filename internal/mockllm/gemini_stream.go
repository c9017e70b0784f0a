package mockllm

import (
	"encoding/json"
	"net/http"
	"time"
)

// gemFraming is how a stream's events are laid out: SSE for ?alt=sse,
// else one JSON array written element by element.
type gemFraming int

const (
	gemSSE gemFraming = iota
	gemArray
)

// gemStream writes streamGenerateContent: each event a whole
// GenerateContentResponse with the next piece of text and the usage so
// far; the last carries finishReason. SSE events are framed exactly as
// Gemini frames them, "data: " + JSON + "\r\n\r\n", the JSON in Google's
// spacing ("key": value, no space after commas).
func (c *call) gemStream(a *gemAnswer, p *plan, framing gemFraming) {
	if !c.wait(p.ttft) {
		return
	}
	h := c.w.Header()
	ct := hdrGemSSE
	if framing == gemArray {
		ct = hdrGemJSON
	}
	c.gemHeaders(h, ct)
	h["Content-Disposition"] = hdrAttach
	c.w.WriteHeader(http.StatusOK)

	id := newResponseID()
	events := 0
	send := func(parts []gemPartOut, finish string, candidates int) bool {
		ev := gemOut{Candidates: []gemCandOut{{Content: gemContentOut{Parts: parts, Role: "model"}, FinishReason: finish}},
			UsageMetadata: a.usage(candidates), ModelVersion: a.model, ResponseID: id}
		var b []byte
		if framing == gemSSE {
			raw, _ := json.Marshal(ev)
			b = append([]byte("data: "), googleSpacing(raw)...)
			b = append(b, "\r\n\r\n"...)
		} else {
			raw, _ := json.MarshalIndent(ev, "", "  ")
			if events == 0 {
				b = append([]byte("["), raw...)
			} else {
				b = append([]byte(",\r\n"), raw...)
			}
		}
		events++
		return c.write(b)
	}
	if a.thought != "" && !send([]gemPartOut{{Text: &a.thought, Thought: true}}, "", 0) {
		return
	}
	tokens := a.candidateTokens()
	n := 1
	if len(a.calls) == 0 {
		n = min(p.chunks, tokens)
	}
	for i := 0; ; i++ {
		if i == p.failAfter || (i == n && p.failAfter > n) {
			c.breakOff(true)
		}
		if i == p.stallAfter || (i == n && p.stallAfter > n) {
			c.breakOff(false)
			return
		}
		if i == n {
			break
		}
		last := i == n-1
		if len(a.calls) > 0 {
			if !send(a.callParts(), a.finish, tokens) {
				return
			}
			continue
		}
		lo, hi := tokens*i/n, tokens*(i+1)/n
		if i > 0 && p.tps > 0 && !c.wait(time.Duration(float64(hi-lo)/p.tps*float64(time.Second))) {
			return
		}
		text := a.reply[a.cuts[lo]:a.cuts[hi]]
		finish := ""
		if last && a.signature == "" {
			finish = a.finish
		}
		if !send([]gemPartOut{{Text: &text}}, finish, hi) {
			return
		}
	}
	if n == 0 || (len(a.calls) == 0 && a.signature != "") {
		// Thinking models close with an empty text part holding the
		// signature; an empty reply still needs its finish reason.
		empty := ""
		if !send([]gemPartOut{{Text: &empty, ThoughtSignature: a.signature}}, a.finish, tokens) {
			return
		}
	}
	if framing == gemArray && !c.write([]byte("]")) {
		return
	}
	c.outcome = outcomeCompleted
}

// googleSpacing rewrites compact JSON with a space after each colon
// outside strings, the way Gemini's stream events are written.
func googleSpacing(b []byte) []byte {
	out := make([]byte, 0, len(b)+len(b)/8)
	in, esc := false, false
	for _, ch := range b {
		out = append(out, ch)
		switch {
		case esc:
			esc = false
		case in && ch == '\\':
			esc = true
		case ch == '"':
			in = !in
		case !in && ch == ':':
			out = append(out, ' ')
		}
	}
	return out
}
