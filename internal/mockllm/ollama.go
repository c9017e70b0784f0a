package mockllm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// The Ollama dialect: the native API under /api/ — POST /api/chat
// (NDJSON streaming by default), POST /api/embed and GET /api/tags — as
// Ollama's API reference documents it (docs/api.md and docs/openapi.yaml
// in the ollama repository). Unlike the OpenAI emulator it knows which
// models are pulled: Options.Models, or ollamaDefaultModels when that is
// empty, and a name without a tag means ":latest", as in Ollama. With
// Options.APIKey set it wants "Authorization: Bearer <key>", as ollama.com
// and authenticating proxies do; a plain Ollama checks nothing.
var ollamaDialect = dialect{
	name:  "ollama",
	match: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") },
	serve: (*Server).serveOllama,
}

// ollamaDefaultModels is what /api/tags lists when Options.Models is empty.
var ollamaDefaultModels = []string{"llama3.2:latest", "qwen3:8b", "gpt-oss:20b", "nomic-embed-text:latest"}

const (
	ollamaDimensions = 768
	// ollamaLoadNanos is the load_duration reported: the model is "warm".
	ollamaLoadNanos = 2154458
)

var (
	hdrOllamaJSON   = []string{"application/json; charset=utf-8"}
	hdrOllamaNDJSON = []string{"application/x-ndjson"}
	hdrText         = []string{"text/plain"}
)

func (s *Server) serveOllama(c *call, body []byte) {
	if s.opts.APIKey != "" && c.r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
		c.ollamaFail(http.StatusUnauthorized, "unauthorized", "")
		return
	}
	route := map[string]string{"/api/chat": http.MethodPost, "/api/embed": http.MethodPost, "/api/tags": http.MethodGet}
	method, ok := route[c.r.URL.Path]
	switch {
	case !ok:
		c.ollamaText(http.StatusNotFound, "404 page not found")
	case c.r.Method != method && !(method == http.MethodGet && c.r.Method == http.MethodHead):
		c.ollamaText(http.StatusMethodNotAllowed, "405 method not allowed")
	case c.r.URL.Path == "/api/chat":
		s.ollamaChat(c, body)
	case c.r.URL.Path == "/api/embed":
		s.ollamaEmbed(c, body)
	default:
		s.ollamaTags(c)
	}
}

// ollamaModels are the pulled models.
func (s *Server) ollamaModels() []string {
	if len(s.opts.Models) > 0 {
		return s.opts.Models
	}
	return ollamaDefaultModels
}

// ollamaPulled resolves a requested name the way Ollama does; "" when the
// model is not pulled.
func (s *Server) ollamaPulled(name string) string {
	want := name
	if !strings.Contains(want, ":") {
		want += ":latest"
	}
	for _, m := range s.ollamaModels() {
		if m == name || m == want {
			return m
		}
	}
	return ""
}

type ollamaChatRequest struct {
	Model    *string                    `json:"model"`
	Messages []ollamaMessage            `json:"messages"`
	Tools    []ollamaTool               `json:"tools"`
	Format   json.RawMessage            `json:"format"`
	Options  map[string]json.RawMessage `json:"options"`
	Stream   *bool                      `json:"stream"`
	Think    json.RawMessage            `json:"think"`
}

type ollamaMessage struct {
	Role       string           `json:"role"`
	Content    string           `json:"content"`
	Thinking   string           `json:"thinking"`
	Images     []string         `json:"images"`
	ToolCalls  []ollamaToolCall `json:"tool_calls"`
	ToolName   string           `json:"tool_name"`
	ToolCallID string           `json:"tool_call_id"`
}

type ollamaToolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name string `json:"name"`
		// A map, as in Ollama: arguments sent as a JSON string fail to decode.
		Arguments map[string]json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type ollamaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// ollamaReply is what one chat request gets: text (cut into tokens) or a
// tool call.
type ollamaReply struct {
	model        string
	stream       bool
	text         string
	cuts         []int
	call         []byte // the tool call object, when answering with one
	callTokens   int
	doneReason   string
	promptTokens int
}

func (x *ollamaReply) evalCount() int {
	if x.call != nil {
		return x.callTokens
	}
	return len(x.cuts) - 1
}

// parseOllamaChat validates body as Ollama's chat handler does.
func (s *Server) parseOllamaChat(c *call, body []byte) (*ollamaReply, *ollamaChatRequest, string, bool) {
	var req ollamaChatRequest
	if len(bytes.TrimSpace(body)) == 0 {
		c.ollamaFail(http.StatusBadRequest, "missing request body", "")
		return nil, nil, "", false
	}
	if err := json.Unmarshal(body, &req); err != nil {
		c.ollamaFail(http.StatusBadRequest, err.Error(), "")
		return nil, nil, "", false
	}
	if req.Model == nil || *req.Model == "" {
		c.ollamaFail(http.StatusBadRequest, "model is required", "")
		return nil, nil, "", false
	}
	c.model = *req.Model
	if s.ollamaPulled(c.model) == "" {
		c.ollamaFail(http.StatusNotFound, ollamaNotFound(c.model), "")
		return nil, nil, "", false
	}
	if msg := checkOllamaChat(&req); msg != "" {
		c.ollamaFail(http.StatusBadRequest, msg, "")
		return nil, nil, "", false
	}
	x := &ollamaReply{model: c.model, stream: req.Stream == nil || *req.Stream, doneReason: "stop"}
	var lastUser string
	for _, m := range req.Messages {
		x.promptTokens += (utf8.RuneCountInString(m.Content)+3)/4 + 3 + 256*len(m.Images)
		if m.Role == "user" {
			lastUser = m.Content
		}
	}
	x.promptTokens = max(x.promptTokens, 1)
	x.text = s.opts.Reply
	if x.text == "" {
		x.text = defaultReply(lastUser)
	}
	x.cuts = tokenCuts(x.text)
	if raw, ok := req.Options["num_predict"]; ok {
		var n int
		if json.Unmarshal(raw, &n) != nil {
			c.ollamaFail(http.StatusBadRequest, `option "num_predict" must be of type integer`, "")
			return nil, nil, "", false
		}
		if n > 0 && n < len(x.cuts)-1 {
			x.cuts = x.cuts[:n+1]
			x.text = x.text[:x.cuts[n]]
			x.doneReason = "length"
		}
	}
	return x, &req, lastUser, true
}

// checkOllamaChat checks what Ollama's API reference constrains: roles,
// base64 images, the format and think values. "" means the request is fine.
func checkOllamaChat(req *ollamaChatRequest) string {
	for _, m := range req.Messages {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return "invalid role: " + m.Role + ", role must be one of [system, user, assistant, tool]"
		}
		for _, img := range m.Images {
			if _, err := base64.StdEncoding.DecodeString(img); err != nil {
				return err.Error()
			}
		}
	}
	switch f := bytes.TrimSpace(req.Format); {
	case len(f) == 0, string(f) == `""`, string(f) == `"json"`, string(f) == "null", f[0] == '{':
	default:
		return `invalid format: expected "json" or a valid JSON schema`
	}
	switch t := string(bytes.TrimSpace(req.Think)); t {
	case "", "null", "true", "false", `"high"`, `"medium"`, `"low"`:
	default:
		return "invalid think value: " + t + ` (must be "high", "medium", "low", true, or false)`
	}
	for _, t := range req.Tools {
		if t.Function.Name == "" {
			return "tool function name is required"
		}
	}
	return ""
}

func ollamaNotFound(model string) string {
	return `model "` + model + `" not found, try pulling it first`
}

func (s *Server) ollamaChat(c *call, body []byte) {
	x, req, lastUser, ok := s.parseOllamaChat(c, body)
	if !ok {
		return
	}
	p, perr := s.newPlan(c, lastUser)
	if perr != nil {
		c.ollamaFail(http.StatusBadRequest, perr.message, "")
		return
	}
	if p.huge > 0 {
		x.text = hugeReply(p.huge)
		x.cuts, x.doneReason = tokenCuts(x.text), "stop"
	}
	// A conversation that ends in a tool result is answered in text, so a
	// client's tool loop ends after one round trip.
	if p.tool != "" && (len(req.Messages) == 0 || req.Messages[len(req.Messages)-1].Role != "tool") {
		var t *ollamaTool
		for i := range req.Tools {
			if req.Tools[i].Function.Name == p.tool {
				t = &req.Tools[i]
			}
		}
		if t == nil {
			c.ollamaFail(http.StatusBadRequest, "@mock(tool="+p.tool+"): the request offers no tool named "+p.tool, "")
			return
		}
		x.call = ollamaCall(t)
		x.callTokens = max(len(x.call)/4, 1)
		x.doneReason = "stop" // Ollama ends a turn of tool calls with "stop"
	}
	if p.hang {
		c.block()
		return
	}
	if s.injectError(&p) {
		if c.wait(p.latency) {
			c.ollamaFail(p.errorStatus, ollamaInjected(p.errorStatus, x.model), p.retryAfter)
		}
		return
	}
	if len(req.Messages) == 0 {
		x.text, x.cuts, x.doneReason = "", []int{0}, "load" // an empty chat loads the model
	}
	if x.stream {
		c.ollamaStream(x, &p)
	} else {
		c.ollamaComplete(x, &p)
	}
}

// ollamaCall builds a call to t with the arguments the OpenAI emulator
// would make up (mockArguments), so tests can predict them.
func ollamaCall(t *ollamaTool) []byte {
	b := []byte(`{"id":"call_`)
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	for range 8 {
		b = append(b, alphabet[rand.IntN(len(alphabet))])
	}
	b = append(b, `","function":{"index":0,"name":`...)
	b = llm.AppendQuote(b, t.Function.Name)
	b = append(b, `,"arguments":`...)
	b = append(b, mockArguments(t.Function.Parameters)...)
	return append(b, "}}"...)
}

// ollamaInjected is the error text Ollama (or the proxy in front of it)
// sends for status.
func ollamaInjected(status int, model string) string {
	switch {
	case status == http.StatusNotFound:
		return ollamaNotFound(model)
	case status == http.StatusTooManyRequests:
		return "too many requests, please try again later"
	case status == http.StatusUnauthorized:
		return "unauthorized"
	case status == http.StatusServiceUnavailable:
		return "server busy, please try again.  maximum pending requests exceeded"
	case status >= 500:
		return "llama runner process has terminated: exit status 2"
	}
	return "mockllm injected error: " + itoa(status) + " " + http.StatusText(status)
}

// appendOllamaHead appends the members every chat line starts with.
func appendOllamaHead(b []byte, model string) []byte {
	b = append(b, `{"model":`...)
	b = llm.AppendQuote(b, model)
	b = append(b, `,"created_at":"`...)
	b = time.Now().UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, `","message":{"role":"assistant","content":`...)
}

// appendOllamaDone appends the end of the last line: done_reason, done and
// the metrics, in the order Ollama's ChatResponse declares them.
func (c *call) appendOllamaDone(b []byte, x *ollamaReply) []byte {
	total := time.Since(c.received).Nanoseconds() + ollamaLoadNanos
	b = append(b, `,"done_reason":"`...)
	b = append(b, x.doneReason...)
	b = append(b, `","done":true,"total_duration":`...)
	b = appendInt(b, total)
	b = append(b, `,"load_duration":`...)
	b = appendInt(b, ollamaLoadNanos)
	b = append(b, `,"prompt_eval_count":`...)
	b = appendInt(b, int64(x.promptTokens))
	b = append(b, `,"prompt_eval_duration":`...)
	b = appendInt(b, int64(x.promptTokens)*250_000)
	b = append(b, `,"eval_count":`...)
	b = appendInt(b, int64(x.evalCount()))
	b = append(b, `,"eval_duration":`...)
	b = appendInt(b, max(total-ollamaLoadNanos-int64(x.promptTokens)*250_000, 1))
	return append(b, '}')
}

func (c *call) ollamaComplete(x *ollamaReply, p *plan) {
	if !c.wait(p.latency) {
		return
	}
	b := appendOllamaHead(nil, x.model)
	if x.call != nil {
		b = append(b, `"","tool_calls":[`...)
		b = append(b, x.call...)
		b = append(b, "]}"...)
	} else {
		b = llm.AppendQuote(b, x.text)
		b = append(b, '}')
	}
	b = c.appendOllamaDone(b, x)
	if p.stallAfter < 0 && p.failAfter < 0 {
		c.ollamaWrite(http.StatusOK, hdrOllamaJSON, b)
		return
	}
	h := c.w.Header()
	h["Content-Type"] = hdrOllamaJSON
	h["Content-Length"] = []string{itoa(len(b))}
	c.w.WriteHeader(http.StatusOK)
	if c.write(b[:len(b)/2]) {
		c.breakOff(p.failAfter >= 0)
	}
}

// ollamaStream writes one NDJSON line per content chunk (a tool call is one
// line), then the done line with the counts, pacing and failing as the
// plan says.
func (c *call) ollamaStream(x *ollamaReply, p *plan) {
	if !c.wait(p.ttft) {
		return
	}
	h := c.w.Header()
	h["Content-Type"] = hdrOllamaNDJSON
	c.w.WriteHeader(http.StatusOK)
	tokens := len(x.cuts) - 1
	n := min(p.chunks, tokens)
	if x.call != nil {
		n = 1
	}
	var b []byte
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
		b = appendOllamaHead(b[:0], x.model)
		if x.call != nil {
			b = append(b, `"","tool_calls":[`...)
			b = append(b, x.call...)
			b = append(b, "]},\"done\":false}\n"...)
		} else {
			lo, hi := tokens*i/n, tokens*(i+1)/n
			if i > 0 && p.tps > 0 && !c.wait(time.Duration(float64(hi-lo)/p.tps*float64(time.Second))) {
				return
			}
			b = llm.AppendQuote(b, x.text[x.cuts[lo]:x.cuts[hi]])
			b = append(b, "},\"done\":false}\n"...)
		}
		if !c.write(b) {
			return
		}
	}
	b = appendOllamaHead(b[:0], x.model)
	b = append(b, `""}`...)
	b = c.appendOllamaDone(b, x)
	if c.write(append(b, '\n')) {
		c.outcome = outcomeCompleted
	}
}

type ollamaEmbedRequest struct {
	Model      *string         `json:"model"`
	Input      json.RawMessage `json:"input"`
	Dimensions int             `json:"dimensions"`
	Truncate   *bool           `json:"truncate"`
}

func (s *Server) ollamaEmbed(c *call, body []byte) {
	var req ollamaEmbedRequest
	if err := json.Unmarshal(body, &req); err != nil {
		msg := err.Error()
		if errors.Is(err, io.EOF) || len(bytes.TrimSpace(body)) == 0 {
			msg = "missing request body"
		}
		c.ollamaFail(http.StatusBadRequest, msg, "")
		return
	}
	if req.Model == nil || *req.Model == "" {
		c.ollamaFail(http.StatusBadRequest, "model is required", "")
		return
	}
	c.model = *req.Model
	if s.ollamaPulled(c.model) == "" {
		c.ollamaFail(http.StatusNotFound, ollamaNotFound(c.model), "")
		return
	}
	var inputs []string
	switch in := bytes.TrimSpace(req.Input); {
	case len(in) == 0 || string(in) == "null":
	case in[0] == '"':
		var one string
		_ = json.Unmarshal(in, &one)
		if one != "" {
			inputs = []string{one}
		}
	default:
		if json.Unmarshal(in, &inputs) != nil {
			c.ollamaFail(http.StatusBadRequest, "invalid input type", "")
			return
		}
	}
	dims := ollamaDimensions
	if req.Dimensions != 0 {
		if req.Dimensions < 0 || req.Dimensions > maxDimensions {
			c.ollamaFail(http.StatusBadRequest, "invalid dimensions", "")
			return
		}
		dims = req.Dimensions
	}
	// A @mock(...) directive in the inputs arms a fault, as in a prompt.
	p, perr := s.newPlan(c, strings.Join(inputs, "\n"))
	if perr != nil {
		c.ollamaFail(http.StatusBadRequest, perr.message, "")
		return
	}
	if p.hang {
		c.block()
		return
	}
	if !c.wait(p.latency) {
		return
	}
	if s.injectError(&p) {
		c.ollamaFail(p.errorStatus, ollamaInjected(p.errorStatus, c.model), p.retryAfter)
		return
	}
	c.armCut(&p)
	tokens := 0
	for _, text := range inputs {
		tokens += max((utf8.RuneCountInString(text)+3)/4, 1)
	}
	took := time.Since(c.received).Nanoseconds() + ollamaLoadNanos
	b := p.hugeAnswer(dims, func(dims int) []byte {
		return ollamaEmbeddings(inputs, dims, c.model, took, tokens)
	})
	c.ollamaWrite(http.StatusOK, hdrOllamaJSON, b)
}

// ollamaEmbeddings is the answer of /api/embed: a vector of dims for each
// input, and the timings of a model already loaded.
func ollamaEmbeddings(inputs []string, dims int, model string, took int64, tokens int) []byte {
	b := []byte(`{"model":`)
	b = llm.AppendQuote(b, model)
	b = append(b, `,"embeddings":[`...)
	vec := make([]float32, dims)
	for i, text := range inputs {
		if i > 0 {
			b = append(b, ',')
		}
		embed(vec, embedInput{text: text, isText: true})
		b = append(b, '[')
		for j, f := range vec {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendFloat32(b, f)
		}
		b = append(b, ']')
	}
	b = append(b, `],"total_duration":`...)
	b = appendInt(b, took)
	b = append(b, `,"load_duration":`...)
	b = appendInt(b, ollamaLoadNanos)
	b = append(b, `,"prompt_eval_count":`...)
	b = appendInt(b, int64(tokens))
	return append(b, '}')
}

// ollamaTags lists the pulled models with details derived from their names.
func (s *Server) ollamaTags(c *call) {
	p, perr := s.newPlan(c, "")
	if perr != nil {
		c.ollamaFail(http.StatusBadRequest, perr.message, "")
		return
	}
	if !c.wait(p.latency) {
		return
	}
	if s.injectError(&p) {
		c.ollamaFail(p.errorStatus, ollamaInjected(p.errorStatus, ""), p.retryAfter)
		return
	}
	b := []byte(`{"models":[`)
	for i, m := range s.ollamaModels() {
		if i > 0 {
			b = append(b, ',')
		}
		h := uint64(14695981039346656037)
		for j := 0; j < len(m); j++ {
			h = (h ^ uint64(m[j])) * 1099511628211
		}
		family := strings.TrimRightFunc(strings.SplitN(m, ":", 2)[0], func(r rune) bool { return !unicode.IsLetter(r) })
		b = append(b, `{"name":`...)
		b = llm.AppendQuote(b, m)
		b = append(b, `,"model":`...)
		b = llm.AppendQuote(b, m)
		b = append(b, `,"modified_at":"2025-10-03T23:34:03.409490317-07:00","size":`...)
		b = appendInt(b, int64(1<<30+h%(8<<30)))
		b = append(b, `,"digest":"`...)
		for k := range 4 {
			const hex = "0123456789abcdef"
			x := h * uint64(k+1) * 0x9e3779b97f4a7c15
			for range 16 {
				b = append(b, hex[x&0xf])
				x >>= 4
			}
		}
		b = append(b, `","details":{"parent_model":"","format":"gguf","family":`...)
		b = llm.AppendQuote(b, family)
		b = append(b, `,"families":[`...)
		b = llm.AppendQuote(b, family)
		b = append(b, `],"parameter_size":"8.0B","quantization_level":"Q4_K_M"}}`...)
	}
	c.ollamaWrite(http.StatusOK, hdrOllamaJSON, append(b, "]}"...))
}

// ollamaWrite sends a complete response.
func (c *call) ollamaWrite(status int, contentType []string, body []byte) {
	h := c.w.Header()
	h["Content-Type"] = contentType
	c.writeWhole(status, body)
}

// ollamaFail answers with Ollama's error body, {"error":"…"}.
func (c *call) ollamaFail(status int, msg, retryAfter string) {
	if retryAfter != "" {
		c.w.Header()["Retry-After"] = []string{retryAfter}
	}
	b := append(llm.AppendQuote([]byte(`{"error":`), msg), '}')
	c.ollamaWrite(status, hdrOllamaJSON, b)
}

// ollamaText answers as Ollama's router does for unknown paths: plain text.
func (c *call) ollamaText(status int, msg string) {
	c.ollamaWrite(status, hdrText, []byte(msg))
}
