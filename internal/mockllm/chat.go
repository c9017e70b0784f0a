package mockllm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

type chatRequest struct {
	Model               *string        `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	ReasoningEffort     *string        `json:"reasoning_effort"`
	documentedParams
}

// documentedParams are the other parameters of OpenAI's chat completions
// request. The emulator reads none of them, but knowing them lets it
// answer any other one as OpenAI does: "Unrecognized request argument
// supplied".
type documentedParams struct {
	Audio            json.RawMessage `json:"audio"`
	FrequencyPenalty json.RawMessage `json:"frequency_penalty"`
	FunctionCall     json.RawMessage `json:"function_call"`
	Functions        json.RawMessage `json:"functions"`
	LogitBias        json.RawMessage `json:"logit_bias"`
	Logprobs         json.RawMessage `json:"logprobs"`
	Metadata         json.RawMessage `json:"metadata"`
	Modalities       json.RawMessage `json:"modalities"`
	N                json.RawMessage `json:"n"`
	ParallelToolCall json.RawMessage `json:"parallel_tool_calls"`
	Prediction       json.RawMessage `json:"prediction"`
	PresencePenalty  json.RawMessage `json:"presence_penalty"`
	PromptCacheKey   json.RawMessage `json:"prompt_cache_key"`
	ResponseFormat   json.RawMessage `json:"response_format"`
	SafetyIdentifier json.RawMessage `json:"safety_identifier"`
	Seed             json.RawMessage `json:"seed"`
	ServiceTier      json.RawMessage `json:"service_tier"`
	Stop             json.RawMessage `json:"stop"`
	Store            json.RawMessage `json:"store"`
	Temperature      json.RawMessage `json:"temperature"`
	ToolChoice       json.RawMessage `json:"tool_choice"`
	Tools            json.RawMessage `json:"tools"`
	TopLogprobs      json.RawMessage `json:"top_logprobs"`
	TopP             json.RawMessage `json:"top_p"`
	User             json.RawMessage `json:"user"`
	Verbosity        json.RawMessage `json:"verbosity"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
}

// unrecognized is OpenAI's answer to a parameter it does not take, or
// one the model does not (reasoning_effort on a model that does not
// reason): a 400 with null param and code.
func unrecognized(name string) *apiError {
	return invalidRequest("", "", "Unrecognized request argument supplied: %s", name)
}

// reasoningModel reports whether model takes reasoning_effort: OpenAI's
// o-series, gpt-5 and gpt-oss.
func reasoningModel(model string) bool {
	m := strings.ToLower(model)
	for _, prefix := range []string{"o1", "o3", "o4", "gpt-5", "gpt-oss"} {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
}

// UnmarshalJSON reads a message leniently: only the request's top level
// is held to the documented parameters (a message's other members,
// tool_calls and the like, are not the emulator's business).
func (m *chatMessage) UnmarshalJSON(b []byte) error {
	type plain chatMessage
	return json.Unmarshal(b, (*plain)(m))
}

// UnmarshalJSON reads stream_options leniently, as chatMessage.
func (o *streamOptions) UnmarshalJSON(b []byte) error {
	type plain streamOptions
	return json.Unmarshal(b, (*plain)(o))
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

var validRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// exchange is a validated chat request and the reply it will get; both
// the streamed and the plain answer are built from it, which is what
// keeps their content and usage identical.
type exchange struct {
	model        string
	stream       bool
	includeUsage bool
	reply        string
	cuts         []int // reply[cuts[i]:cuts[i+1]] is token i
	finish       string
	promptTokens int
}

func (e *exchange) completionTokens() int { return len(e.cuts) - 1 }

// parseChat validates body as OpenAI does and returns the exchange and
// the text of the last user message (where directives live).
func (s *Server) parseChat(body []byte) (*exchange, string, *apiError) {
	if x, lastUser, ok := s.parseCommonChat(body); ok {
		return x, lastUser, nil
	}
	return s.decodeChat(body)
}

// decodeChat is parseChat with encoding/json, which knows every parameter
// and words every error as OpenAI does.
func (s *Server) decodeChat(body []byte) (*exchange, string, *apiError) {
	var req chatRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`); ok {
			return nil, "", unrecognized(strings.TrimSuffix(name, `"`))
		}
		if e := locateMessageError(body); e != nil {
			return nil, "", e
		}
		return nil, "", typeError(err)
	}
	if req.Model == nil || *req.Model == "" {
		return nil, "", missingModel()
	}
	if req.ReasoningEffort != nil && !reasoningModel(*req.Model) {
		return nil, "", unrecognized("reasoning_effort")
	}
	if req.Messages == nil {
		return nil, "", missingParam("messages")
	}
	if len(req.Messages) == 0 {
		return nil, "", invalidRequest("messages", "empty_array",
			"Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	if req.StreamOptions != nil && !req.Stream {
		return nil, "", invalidRequest("stream_options", "",
			"The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	x := &exchange{model: *req.Model, stream: req.Stream, includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
	var lastUser string
	for i, m := range req.Messages {
		if m.Role == nil {
			return nil, "", invalidRequest("messages["+itoa(i)+"].role", "missing_required_parameter",
				"Missing required parameter: 'messages[%d].role'.", i)
		}
		if !validRoles[*m.Role] {
			return nil, "", invalidRequest("messages["+itoa(i)+"].role", "invalid_value",
				"Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", *m.Role)
		}
		text, err := contentText(m.Content, i)
		if err != nil {
			return nil, "", err
		}
		x.promptTokens += (utf8.RuneCountInString(text)+3)/4 + 3
		if *m.Role == "user" {
			lastUser = text
		}
	}
	limit := req.MaxCompletionTokens
	if limit == nil {
		limit = req.MaxTokens
	}
	s.reply(x, lastUser, limit)
	return x, lastUser, nil
}

// reply fills in x's reply, the prompt's token count read, for a request
// whose last user message is lastUser and whose token limit is limit.
func (s *Server) reply(x *exchange, lastUser string, limit *int) {
	x.promptTokens = max(x.promptTokens, 1)
	x.reply, x.cuts = s.replyFor(lastUser)
	x.finish = "stop"
	if limit != nil && *limit > 0 && *limit < x.completionTokens() {
		x.cuts = x.cuts[:*limit+1]
		x.reply = x.reply[:x.cuts[*limit]]
		x.finish = "length"
	}
}

// locateMessageError finds which message has a field of the wrong type.
// encoding/json reports "messages.role" without the index, but OpenAI
// names "messages[2].role", so a failed request is decoded again one
// message at a time; the fast path never pays for this.
func locateMessageError(body []byte) *apiError {
	var top struct {
		Messages json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &top) != nil || len(top.Messages) == 0 || top.Messages[0] != '[' {
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(top.Messages, &items) != nil {
		return nil
	}
	for i, it := range items {
		name := "messages[" + itoa(i) + "]"
		if it[0] != '{' {
			return invalidRequest(name, "invalid_type",
				"Invalid type for '%s': expected an object, but got %s instead.", name, jsonKind(it[0]))
		}
		var m chatMessage
		if err := json.Unmarshal(it, &m); err != nil {
			e := typeError(err)
			e.param = name + "." + e.param
			e.message = strings.Replace(e.message, "'", "'"+name+".", 1)
			return e
		}
	}
	return nil
}

// contentText is the text of a message's content: a string, or the text
// parts of an array of content parts. Other parts (images, audio) count
// for nothing.
func contentText(raw json.RawMessage, i int) (string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	param := "messages[" + itoa(i) + "].content"
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errMalformedJSON
		}
		return s, nil
	case '[':
		var parts []contentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", invalidRequest(param, "invalid_type",
				"Invalid type for '%s': expected a string or an array of content parts.", param)
		}
		var b strings.Builder
		for _, p := range parts {
			if p.Type == "text" {
				b.WriteString(p.Text)
			}
		}
		return b.String(), nil
	}
	return "", invalidRequest(param, "invalid_type",
		"Invalid type for '%s': expected one of a string or array of objects, but got %s instead.", param, jsonKind(raw[0]))
}

func jsonKind(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// lastReply is the reply to a last user message and its token cuts,
// kept because a benchmark sends the same prompt again and again.
type lastReply struct {
	said, reply string
	cuts        []int // shared: exchanges may reslice it, never write it
}

// replyFor returns the reply to lastUser and its token cuts, from the
// last one made when it answers the same message.
func (s *Server) replyFor(lastUser string) (string, []int) {
	if m := s.lastReply.Load(); m != nil && m.said == lastUser {
		return m.reply, m.cuts
	}
	m := &lastReply{said: lastUser, reply: s.opts.Reply}
	if m.reply == "" {
		m.reply = defaultReply(lastUser)
	}
	m.cuts = tokenCuts(m.reply)
	s.lastReply.Store(m)
	return m.reply, m.cuts
}

// defaultReply is deterministic so tests can predict it, and quotes the
// prompt so a human watching a demo can tell replies apart.
func defaultReply(lastUser string) string {
	said := strings.Join(strings.Fields(stripDirectives(lastUser)), " ")
	if said == "" {
		return "Hello from mockllm, the gatehouse test upstream. You said nothing."
	}
	if n := 200; len(said) > n {
		for n > 0 && !utf8.RuneStart(said[n]) {
			n--
		}
		said = said[:n] + "…"
	}
	return "Hello from mockllm, the gatehouse test upstream. You said: " + said
}

// tokenCuts splits s into word pieces, each a word with the spaces before
// it (trailing spaces stay with the last word), and returns the
// boundaries. A piece is the mock's
// token: completion_tokens is their count and chunks never split one.
func tokenCuts(s string) []int {
	cuts := make([]int, 1, len(s)/4+2)
	inWord, pending := false, 0
	for i, r := range s {
		if unicode.IsSpace(r) {
			if inWord {
				pending = i // a cut, if another word follows
			}
			inWord = false
			continue
		}
		if !inWord && pending > 0 {
			cuts = append(cuts, pending)
		}
		inWord = true
	}
	if len(s) > 0 {
		cuts = append(cuts, len(s))
	}
	return cuts
}

func (s *Server) chat(c *call, body []byte) {
	x, lastUser, perr := s.parseChat(body)
	if perr != nil {
		c.fail(perr)
		return
	}
	c.model = x.model
	p, perr := s.newPlan(c, lastUser)
	if perr != nil {
		c.fail(perr)
		return
	}
	if p.huge > 0 {
		x.reply = hugeReply(p.huge)
		x.cuts, x.finish = tokenCuts(x.reply), "stop"
	}
	if p.hang {
		c.block()
		return
	}
	if s.injectError(&p) {
		if c.wait(p.latency) {
			c.fail(injectedError(p.errorStatus, x.model, p.retryAfter))
		}
		return
	}
	p.held = int64(x.promptTokens + x.completionTokens())
	defer s.admit(p.held)()
	if p.perToken > 0 {
		p.jitter = jitterFactor(s.load.Seed, body, s.load.Jitter)
	}
	bp := s.bufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 {
			s.bufs.Put(bp)
		}
	}()
	if p.tool != "" {
		tc, perr := openAIToolCall(body, p.tool)
		if perr != nil {
			c.fail(perr)
			return
		}
		if tc != nil && x.stream {
			*bp = c.streamToolCall(x, &p, tc, (*bp)[:0])
			return
		}
		if tc != nil {
			*bp = c.completeToolCall(x, &p, tc, (*bp)[:0])
			return
		}
	}
	if x.stream {
		*bp = c.stream(x, &p, (*bp)[:0])
	} else {
		*bp = c.complete(x, &p, (*bp)[:0])
	}
}

const (
	systemFingerprint = "fp_6d7a0c9f31"
	serviceTier       = "default"
)

// complete writes the chat.completion object. stall_after and fail_after
// apply too: half the body is sent, then it goes silent or is cut, which
// is what a non-streamed failure looks like on the wire.
func (c *call) complete(x *exchange, p *plan, b []byte) []byte {
	if !c.wait(p.latency) || !c.read(p, x.promptTokens) || !c.generate(p, x.completionTokens()) {
		return b
	}
	b = append(b, `{"id":"`...)
	b = appendCompletionID(b)
	b = append(b, `","object":"chat.completion","created":`...)
	b = appendInt(b, time.Now().Unix())
	b = append(b, `,"model":`...)
	b = llm.AppendQuote(b, x.model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = llm.AppendQuote(b, x.reply)
	b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"`...)
	b = append(b, x.finish...)
	b = append(b, `"}],"usage":`...)
	b = appendUsage(b, x.promptTokens, x.completionTokens())
	b = append(b, `,"service_tier":"`+serviceTier+`","system_fingerprint":"`+systemFingerprint+`"}`...)
	if p.stallAfter < 0 && p.failAfter < 0 {
		c.writeJSON(http.StatusOK, b)
		return b
	}
	h := c.w.Header()
	h["Content-Type"] = hdrJSON
	h["Content-Length"] = []string{itoa(len(b))}
	c.setCommonHeaders(h)
	c.w.WriteHeader(http.StatusOK)
	if c.write(b[:len(b)/2]) {
		c.breakOff(p.failAfter >= 0)
	}
	return b
}

func appendUsage(b []byte, prompt, completion int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = appendInt(b, int64(prompt))
	b = append(b, `,"completion_tokens":`...)
	b = appendInt(b, int64(completion))
	b = append(b, `,"total_tokens":`...)
	b = appendInt(b, int64(prompt+completion))
	return append(b, `,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}
