package mockllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"gatehouse/internal/llm"
)

// The Anthropic dialect: the Messages API (POST /v1/messages, streamed
// and not), token counting (POST /v1/messages/count_tokens) and the models
// list (GET /v1/models with an anthropic-version header), written from
// Anthropic's API reference. It checks what Anthropic checks — the
// x-api-key and anthropic-version headers, max_tokens, roles that start
// with user and alternate, tool_result blocks answering the tool_use
// blocks of the turn before, thinking constraints, no unknown fields — so
// a gateway's translation bug fails a test instead of passing silently.
var anthropicDialect = dialect{
	name: "anthropic",
	match: func(r *http.Request) bool {
		p := r.URL.Path
		return p == "/v1/messages" || p == "/v1/messages/count_tokens" ||
			(r.Header.Get("Anthropic-Version") != "" && (p == "/v1/models" || strings.HasPrefix(p, "/v1/models/")))
	},
	serve: (*Server).serveAnthropic,
}

// anthError is Anthropic's error response:
// {"type":"error","error":{"type":…,"message":…},"request_id":…}.
type anthError struct {
	status     int
	typ        string
	message    string
	retryAfter string
}

func anthInvalid(format string, args ...any) *anthError {
	return &anthError{status: http.StatusBadRequest, typ: "invalid_request_error", message: fmt.Sprintf(format, args...)}
}

var (
	errAnthNoKey      = &anthError{status: http.StatusUnauthorized, typ: "authentication_error", message: "x-api-key header is required"}
	errAnthBadKey     = &anthError{status: http.StatusUnauthorized, typ: "authentication_error", message: "invalid x-api-key"}
	errAnthNoVersion  = anthInvalid("anthropic-version: header is required")
	errAnthNotFound   = &anthError{status: http.StatusNotFound, typ: "not_found_error", message: "Not Found"}
	errAnthNotJSON    = anthInvalid("There was an issue with the request body: it is not valid JSON.")
	anthVersions      = map[string]bool{"2023-06-01": true, "2023-01-01": true}
	anthToolName      = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	anthImageTypes    = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}
	anthMessageFields = map[string]bool{"model": true, "messages": true, "max_tokens": true, "system": true, "tools": true,
		"tool_choice": true, "stop_sequences": true, "temperature": true, "top_p": true, "top_k": true, "thinking": true,
		"metadata": true, "stream": true, "service_tier": true}
	anthCountFields = map[string]bool{"model": true, "messages": true, "system": true, "tools": true, "tool_choice": true, "thinking": true}
)

// anthInjected is the body Anthropic sends for status, so a gateway's
// error mapping meets the real shapes.
func anthInjected(status int, model, retryAfter string) *anthError {
	e := &anthError{status: status, retryAfter: retryAfter, typ: "invalid_request_error"}
	switch {
	case status == http.StatusUnauthorized:
		e.typ, e.message = "authentication_error", "invalid x-api-key"
	case status == http.StatusForbidden:
		e.typ, e.message = "permission_error", "Your API key does not have permission to use the specified resource."
	case status == http.StatusNotFound:
		e.typ, e.message = "not_found_error", "model: "+model
	case status == http.StatusRequestEntityTooLarge:
		e.typ, e.message = "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case status == http.StatusTooManyRequests:
		e.typ = "rate_limit_error"
		e.message = "This request would exceed the rate limit for your organization of 50 requests per minute. " +
			"For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. " +
			"Please reduce the prompt length or the maximum tokens requested, or try again later."
	case status == 529:
		e.typ, e.message = "overloaded_error", "Overloaded"
	case status >= 500:
		e.typ, e.message = "api_error", "Internal server error"
	default:
		e.message = "mockllm injected error: " + itoa(status) + " " + http.StatusText(status) + "."
	}
	return e
}

// failAnthropic answers with e in Anthropic's shape.
func (c *call) failAnthropic(e *anthError) {
	if e.retryAfter != "" {
		c.w.Header()["Retry-After"] = []string{e.retryAfter}
	}
	b := append([]byte(`{"type":"error","error":{"type":`), llm.AppendQuote(nil, e.typ)...)
	b = append(b, `,"message":`...)
	b = llm.AppendQuote(b, e.message)
	b = append(b, `},"request_id":`...)
	b = llm.AppendQuote(b, c.reqID)
	c.writeAnthropic(e.status, append(b, '}'))
}

// writeAnthropic sends a complete JSON response with Anthropic's headers.
func (c *call) writeAnthropic(status int, body []byte) {
	h := c.w.Header()
	h["Content-Type"] = hdrJSON
	c.setAnthropicHeaders(h)
	c.writeWhole(status, body)
}

var (
	hdrAnthOrg      = []string{"8f3b2c1e-5d6a-4b7c-9e0f-1a2b3c4d5e6f"}
	hdrAnthReqLimit = []string{"4000"}
	hdrAnthReqLeft  = []string{"3999"}
	hdrAnthTokLimit = []string{"400000"}
)

func (c *call) setAnthropicHeaders(h http.Header) {
	h["Request-Id"] = []string{c.reqID}
	h["Anthropic-Organization-Id"] = hdrAnthOrg
	h["Anthropic-Ratelimit-Requests-Limit"] = hdrAnthReqLimit
	h["Anthropic-Ratelimit-Requests-Remaining"] = hdrAnthReqLeft
	h["Anthropic-Ratelimit-Tokens-Limit"] = hdrAnthTokLimit
	h["Anthropic-Ratelimit-Tokens-Remaining"] = hdrAnthTokLimit
}

func (s *Server) serveAnthropic(c *call, body []byte) {
	r := c.r
	c.reqID = "req_011" + anthID(21)
	if s.opts.APIKey != "" {
		switch key := r.Header.Get("X-Api-Key"); {
		case key == "":
			c.failAnthropic(errAnthNoKey)
			return
		case key != s.opts.APIKey:
			c.failAnthropic(errAnthBadKey)
			return
		}
	}
	v := r.Header.Get("Anthropic-Version")
	if v == "" {
		c.failAnthropic(errAnthNoVersion)
		return
	}
	if !anthVersions[v] {
		c.failAnthropic(anthInvalid("anthropic-version: invalid version %q", v))
		return
	}
	path := r.URL.Path
	switch {
	case path == "/v1/messages" && r.Method == http.MethodPost:
		s.anthropicMessages(c, body)
	case path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		s.anthropicCount(c, body)
	case path == "/v1/models" && r.Method == http.MethodGet:
		c.writeAnthropic(http.StatusOK, s.anthropicModels())
	case strings.HasPrefix(path, "/v1/models/") && r.Method == http.MethodGet:
		s.anthropicModel(c, strings.TrimPrefix(path, "/v1/models/"))
	default:
		c.failAnthropic(errAnthNotFound)
	}
}

// anthRequest is a Messages request as the mock reads it.
type anthRequest struct {
	Model         *string         `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	Messages      []anthMessage   `json:"messages"`
	System        json.RawMessage `json:"system"`
	Tools         []anthTool      `json:"tools"`
	ToolChoice    *anthToolChoice `json:"tool_choice"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Thinking      *anthThinking   `json:"thinking"`
	Metadata      map[string]any  `json:"metadata"`
	Stream        bool            `json:"stream"`

	blocks      [][]anthBlock // Messages[i].Content decoded
	system      []anthBlock   // System decoded
	cached      bool          // some block asked for prompt caching
	toolsByName map[string]*anthTool
}

type anthMessage struct {
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthBlock struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text"`
	Source       *anthSource     `json:"source"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	Thinking     *string         `json:"thinking"`
	Signature    *string         `json:"signature"`
	Data         string          `json:"data"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type anthSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type anthTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type anthToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

type anthThinking struct {
	Type         string `json:"type"`
	BudgetTokens *int   `json:"budget_tokens"`
}

// parseAnthropic decodes and validates a Messages (or count_tokens)
// request, allowing the top-level fields in allowed.
func parseAnthropic(body []byte, allowed map[string]bool) (*anthRequest, *anthError) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, errAnthNotJSON
	}
	for k := range top {
		if !allowed[k] {
			return nil, anthInvalid("%s: Extra inputs are not permitted", k)
		}
	}
	req := &anthRequest{}
	if err := json.Unmarshal(body, req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, anthInvalid("%s: Input should be a valid %s", te.Field, anthTypeName(te.Type.String()))
		}
		return nil, errAnthNotJSON
	}
	if req.Model == nil || *req.Model == "" {
		return nil, anthInvalid("model: Field required")
	}
	if allowed["max_tokens"] {
		if req.MaxTokens == nil {
			return nil, anthInvalid("max_tokens: Field required")
		}
		if *req.MaxTokens < 1 {
			return nil, anthInvalid("max_tokens: Input should be greater than or equal to 1")
		}
	}
	if req.Messages == nil {
		return nil, anthInvalid("messages: Field required")
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"temperature", req.Temperature}, {"top_p", req.TopP}} {
		if f.v != nil && (*f.v < 0 || *f.v > 1) {
			return nil, anthInvalid("%s: Input should be between 0 and 1", f.name)
		}
	}
	for k, v := range req.Metadata {
		if k != "user_id" {
			return nil, anthInvalid("metadata.%s: Extra inputs are not permitted", k)
		}
		if _, ok := v.(string); !ok && v != nil {
			return nil, anthInvalid("metadata.user_id: Input should be a valid string")
		}
	}
	steps := []func() *anthError{req.checkSystem, req.checkMessages, req.checkTools, req.checkThinking}
	for _, step := range steps {
		if e := step(); e != nil {
			return nil, e
		}
	}
	return req, nil
}

func anthTypeName(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "string":
		return "string"
	case "int":
		return "integer"
	case "float64":
		return "number"
	case "bool":
		return "boolean"
	}
	if strings.HasPrefix(goType, "[]") {
		return "list"
	}
	return "dictionary"
}

func (req *anthRequest) checkSystem() *anthError {
	switch kind := firstByte(req.System); kind {
	case 0, 'n':
		return nil
	case '"':
		var s string
		_ = json.Unmarshal(req.System, &s)
		req.system = []anthBlock{{Type: "text", Text: &s}}
		return nil
	case '[':
		if err := json.Unmarshal(req.System, &req.system); err != nil {
			return anthInvalid("system: Input should be a valid list of text blocks")
		}
		for i, b := range req.system {
			if b.Type != "text" || b.Text == nil {
				return anthInvalid("system.%d.type: Input should be 'text'", i)
			}
			if e := req.checkCache(b.CacheControl, fmt.Sprintf("system.%d", i)); e != nil {
				return e
			}
		}
		return nil
	}
	return anthInvalid("system: Input should be a valid string or a list of text blocks")
}

func firstByte(raw json.RawMessage) byte {
	for _, c := range raw {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

func (req *anthRequest) checkCache(cc json.RawMessage, at string) *anthError {
	if firstByte(cc) == 0 || firstByte(cc) == 'n' {
		return nil
	}
	var w struct {
		Type string `json:"type"`
		TTL  string `json:"ttl"`
	}
	if json.Unmarshal(cc, &w) != nil || w.Type != "ephemeral" || (w.TTL != "" && w.TTL != "5m" && w.TTL != "1h") {
		return anthInvalid("%s.cache_control: Input should be {\"type\": \"ephemeral\"} with an optional ttl of \"5m\" or \"1h\"", at)
	}
	req.cached = true
	return nil
}

// checkMessages enforces the conversation's shape: user first, roles
// alternating, every tool_use answered by a tool_result in the next turn
// and every tool_result answering a tool_use of the turn before.
func (req *anthRequest) checkMessages() *anthError {
	if len(req.Messages) == 0 {
		return anthInvalid("messages: at least one message is required")
	}
	req.blocks = make([][]anthBlock, len(req.Messages))
	prevRole := ""
	for i, m := range req.Messages {
		if m.Role == nil {
			return anthInvalid("messages.%d.role: Field required", i)
		}
		role := *m.Role
		switch role {
		case "user", "assistant":
		case "system":
			return anthInvalid("messages: Unexpected role \"system\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role.")
		default:
			return anthInvalid("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i == 0 && role != "user" {
			return anthInvalid("messages: first message must use the \"user\" role")
		}
		if role == prevRole {
			return anthInvalid("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", role)
		}
		prevRole = role
		blocks, e := req.contentBlocks(m.Content, i, role)
		if e != nil {
			return e
		}
		req.blocks[i] = blocks
	}
	for i := range req.blocks {
		if e := req.checkToolPairs(i); e != nil {
			return e
		}
	}
	return nil
}

func (req *anthRequest) contentBlocks(raw json.RawMessage, i int, role string) ([]anthBlock, *anthError) {
	at := fmt.Sprintf("messages.%d.content", i)
	var blocks []anthBlock
	switch firstByte(raw) {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		if s == "" && role == "user" {
			return nil, anthInvalid("messages.%d: user messages must have non-empty content", i)
		}
		return []anthBlock{{Type: "text", Text: &s}}, nil
	case '[':
		if err := json.Unmarshal(raw, &blocks); err != nil {
			return nil, anthInvalid("%s: Input should be a valid list of content blocks", at)
		}
	case 0:
		return nil, anthInvalid("%s: Field required", at)
	default:
		return nil, anthInvalid("%s: Input should be a valid string or list of content blocks", at)
	}
	if len(blocks) == 0 && role == "user" {
		return nil, anthInvalid("messages.%d: user messages must have non-empty content", i)
	}
	sawOther := false
	for j := range blocks {
		b := &blocks[j]
		bat := fmt.Sprintf("%s.%d", at, j)
		if e := req.checkBlock(b, bat, role); e != nil {
			return nil, e
		}
		if b.Type == "tool_result" && sawOther {
			return nil, anthInvalid("messages.%d: `tool_result` blocks must come first in the content of a user message, before any other content", i)
		}
		sawOther = sawOther || b.Type != "tool_result"
	}
	return blocks, nil
}

func (req *anthRequest) checkBlock(b *anthBlock, at, role string) *anthError {
	if e := req.checkCache(b.CacheControl, at); e != nil {
		return e
	}
	switch b.Type {
	case "text":
		if b.Text == nil {
			return anthInvalid("%s.text: Field required", at)
		}
		if *b.Text == "" {
			return anthInvalid("messages: text content blocks must be non-empty")
		}
	case "image", "document":
		if role != "user" {
			return anthInvalid("%s.type: %s blocks are only allowed in user messages", at, b.Type)
		}
		return checkSource(b, at)
	case "tool_use":
		if role != "assistant" {
			return anthInvalid("%s.type: tool_use blocks are only allowed in assistant messages", at)
		}
		if b.ID == "" || b.Name == "" {
			return anthInvalid("%s: tool_use blocks need an id and a name", at)
		}
		if firstByte(b.Input) != '{' {
			return anthInvalid("%s.input: Input should be a valid dictionary", at)
		}
	case "tool_result":
		if role != "user" {
			return anthInvalid("%s.type: tool_result blocks are only allowed in user messages", at)
		}
		if b.ToolUseID == "" {
			return anthInvalid("%s.tool_use_id: Field required", at)
		}
		return req.checkToolResultContent(b, at)
	case "thinking":
		if role != "assistant" {
			return anthInvalid("%s.type: thinking blocks are only allowed in assistant messages", at)
		}
		if b.Thinking == nil || b.Signature == nil {
			return anthInvalid("%s: thinking blocks need thinking and signature", at)
		}
		if *b.Signature != anthSignature(*b.Thinking) {
			return anthInvalid("%s: Invalid `signature` in `thinking` block", at)
		}
	case "redacted_thinking":
		if role != "assistant" || b.Data == "" {
			return anthInvalid("%s: redacted_thinking blocks need data and belong to assistant messages", at)
		}
	default:
		return anthInvalid("%s.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'text', 'image', 'document', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking'", at, b.Type)
	}
	return nil
}

func checkSource(b *anthBlock, at string) *anthError {
	s := b.Source
	if s == nil {
		return anthInvalid("%s.source: Field required", at)
	}
	switch s.Type {
	case "base64":
		if b.Type == "image" && !anthImageTypes[s.MediaType] {
			return anthInvalid("%s.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", at)
		}
		if b.Type == "document" && s.MediaType != "application/pdf" {
			return anthInvalid("%s.source.base64.media_type: Input should be 'application/pdf'", at)
		}
		if s.Data == "" {
			return anthInvalid("%s.source.base64.data: Field required", at)
		}
	case "url":
		if !strings.HasPrefix(s.URL, "http://") && !strings.HasPrefix(s.URL, "https://") {
			return anthInvalid("%s.source.url.url: Input should be a valid URL", at)
		}
	default:
		return anthInvalid("%s.source.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'base64', 'url'", at, s.Type)
	}
	return nil
}

// checkToolResultContent checks a tool_result's content: absent, a
// string, or text and image blocks.
func (req *anthRequest) checkToolResultContent(b *anthBlock, at string) *anthError {
	switch firstByte(b.Content) {
	case 0, 'n', '"':
		return nil
	case '[':
		var inner []anthBlock
		if json.Unmarshal(b.Content, &inner) != nil {
			return anthInvalid("%s.content: Input should be a valid list", at)
		}
		for k := range inner {
			iat := fmt.Sprintf("%s.content.%d", at, k)
			if inner[k].Type != "text" && inner[k].Type != "image" && inner[k].Type != "document" {
				return anthInvalid("%s.type: Input should be 'text', 'image' or 'document'", iat)
			}
			if e := req.checkBlock(&inner[k], iat, "user"); e != nil {
				return e
			}
		}
		return nil
	}
	return anthInvalid("%s.content: Input should be a valid string or list", at)
}

// checkToolPairs checks that message i's tool_results answer message
// i-1's tool_uses, all of them.
func (req *anthRequest) checkToolPairs(i int) *anthError {
	uses := map[string]bool{}
	if i > 0 {
		for _, b := range req.blocks[i-1] {
			if b.Type == "tool_use" {
				uses[b.ID] = true
			}
		}
	}
	answered := map[string]bool{}
	for j, b := range req.blocks[i] {
		if b.Type != "tool_result" {
			continue
		}
		if !uses[b.ToolUseID] {
			return anthInvalid("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
		}
		answered[b.ToolUseID] = true
	}
	if i == 0 || len(uses) == 0 {
		return nil
	}
	var missing []string
	for _, b := range req.blocks[i-1] {
		if b.Type == "tool_use" && !answered[b.ID] {
			missing = append(missing, b.ID)
		}
	}
	if len(missing) > 0 {
		return anthInvalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(missing, ", "))
	}
	return nil
}

func (req *anthRequest) checkTools() *anthError {
	req.toolsByName = map[string]*anthTool{}
	for i := range req.Tools {
		t := &req.Tools[i]
		if !anthToolName.MatchString(t.Name) {
			return anthInvalid("tools.%d.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", i)
		}
		if req.toolsByName[t.Name] != nil {
			return anthInvalid("tools: Tool names must be unique.")
		}
		req.toolsByName[t.Name] = t
		if firstByte(t.InputSchema) == 0 {
			return anthInvalid("tools.%d.input_schema: Field required", i)
		}
		var schema struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(t.InputSchema, &schema) != nil || schema.Type != "object" {
			return anthInvalid("tools.%d.input_schema.type: Input should be 'object'", i)
		}
		if e := req.checkCache(t.CacheControl, fmt.Sprintf("tools.%d", i)); e != nil {
			return e
		}
	}
	tc := req.ToolChoice
	if tc == nil {
		return nil
	}
	switch tc.Type {
	case "auto", "any", "none":
	case "tool":
		if tc.Name == "" {
			return anthInvalid("tool_choice.tool.name: Field required")
		}
		if req.toolsByName[tc.Name] == nil {
			return anthInvalid("tool_choice: Tool '%s' not found in provided tools", tc.Name)
		}
	default:
		return anthInvalid("tool_choice.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", tc.Type)
	}
	if len(req.Tools) == 0 {
		return anthInvalid("tool_choice may only be specified while providing tools.")
	}
	return nil
}

// checkThinking applies extended thinking's rules.
func (req *anthRequest) checkThinking() *anthError {
	th := req.Thinking
	if th == nil || th.Type == "disabled" {
		return nil
	}
	if th.Type != "enabled" {
		return anthInvalid("thinking.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'disabled', 'enabled'", th.Type)
	}
	if th.BudgetTokens == nil {
		return anthInvalid("thinking.enabled.budget_tokens: Field required")
	}
	if *th.BudgetTokens < 1024 {
		return anthInvalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
	}
	if req.MaxTokens != nil && *th.BudgetTokens >= *req.MaxTokens {
		return anthInvalid("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
	}
	if req.Temperature != nil && *req.Temperature != 1 {
		return anthInvalid("`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking")
	}
	if req.TopP != nil && *req.TopP < 0.95 {
		return anthInvalid("`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled.")
	}
	if req.TopK != nil {
		return anthInvalid("`top_k` must be unset when thinking is enabled.")
	}
	if tc := req.ToolChoice; tc != nil && (tc.Type == "any" || tc.Type == "tool") {
		return anthInvalid("Thinking may not be enabled when tool_choice forces tool use.")
	}
	// In a tool-use loop the last assistant turn must open with its thinking.
	n := len(req.blocks)
	if n >= 2 && req.Messages[n-2].Role != nil && *req.Messages[n-2].Role == "assistant" {
		last := req.blocks[n-2]
		hasToolUse := false
		for _, b := range last {
			hasToolUse = hasToolUse || b.Type == "tool_use"
		}
		if hasToolUse && len(last) > 0 && last[0].Type != "thinking" && last[0].Type != "redacted_thinking" {
			return anthInvalid("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`.", n-2, last[0].Type)
		}
	}
	return nil
}

// promptText is all the text of the request, for the token estimate, and
// the text of the last user turn (tool results included), which the reply
// quotes and where @mock directives live.
func (req *anthRequest) promptText() (tokens int, lastUser string) {
	count := func(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }
	for _, b := range req.system {
		tokens += count(*b.Text)
	}
	for i, blocks := range req.blocks {
		tokens += 3
		var text strings.Builder
		for _, b := range blocks {
			switch {
			case b.Text != nil:
				text.WriteString(*b.Text)
			case b.Type == "tool_result":
				text.WriteString(toolResultText(b.Content))
			case b.Type == "tool_use":
				text.Write(b.Input)
			case b.Type == "image" || b.Type == "document":
				tokens += 85
			}
		}
		tokens += count(text.String())
		if *req.Messages[i].Role == "user" {
			lastUser = text.String()
		}
	}
	for _, t := range req.Tools {
		tokens += count(t.Name+t.Description) + count(string(t.InputSchema))
	}
	return max(tokens, 1), lastUser
}

func toolResultText(raw json.RawMessage) string {
	switch firstByte(raw) {
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	case '[':
		var inner []anthBlock
		_ = json.Unmarshal(raw, &inner)
		var b strings.Builder
		for _, x := range inner {
			if x.Text != nil {
				b.WriteString(*x.Text)
			}
		}
		return b.String()
	}
	return ""
}

func (s *Server) anthropicCount(c *call, body []byte) {
	req, e := parseAnthropic(body, anthCountFields)
	if e != nil {
		c.failAnthropic(e)
		return
	}
	c.model = *req.Model
	tokens, _ := req.promptText()
	c.writeAnthropic(http.StatusOK, append(appendInt([]byte(`{"input_tokens":`), int64(tokens)), '}'))
}
