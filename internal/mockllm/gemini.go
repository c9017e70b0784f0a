package mockllm

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file emulates the Google AI Gemini API (generativelanguage.
// googleapis.com/v1beta) as its reference documents it: generateContent,
// streamGenerateContent (SSE with ?alt=sse, else a streamed JSON array),
// embedContent, batchEmbedContents and the models list, with Google's
// error body {"error":{"code","message","status","details"}}. The chat
// side is in gemini_chat.go (validation, replies) and gemini_stream.go.
//
// Credentials are checked as Google checks them: with Options.APIKey set,
// the key must arrive in x-goog-api-key or ?key=; none at all is a 403
// PERMISSION_DENIED, a wrong one a 400 INVALID_ARGUMENT (API_KEY_INVALID).
// Request bodies are decoded strictly, because Gemini rejects unknown
// fields: a gateway that sends an OpenAI field to Gemini fails here too.
// Only the camelCase spelling of fields is accepted (Gemini also takes
// snake_case).

var geminiDialect = dialect{
	name:  "gemini",
	match: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/v1beta/models") },
	serve: (*Server).serveGemini,
}

// geminiModels is what GET /v1beta/models lists when Options.Models is
// empty; generateContent accepts any model name.
var geminiModels = []string{"gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.0-flash", "gemini-embedding-001"}

// gemError is one of Google's error responses.
type gemError struct {
	code       int
	status     string // the google.rpc.Code name, e.g. RESOURCE_EXHAUSTED
	message    string
	reason     string // ErrorInfo reason, e.g. API_KEY_INVALID
	retryDelay string // RetryInfo retryDelay, e.g. "34s"
	retryAfter string // Retry-After header, set by injected errors only
}

type gemDetail struct {
	Type       string            `json:"@type"`
	Reason     string            `json:"reason,omitempty"`
	Domain     string            `json:"domain,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Violations []gemViolation    `json:"violations,omitempty"`
	RetryDelay string            `json:"retryDelay,omitempty"`
}

type gemViolation struct {
	QuotaMetric string `json:"quotaMetric"`
	QuotaID     string `json:"quotaId"`
}

func (e *gemError) body() []byte {
	type inner struct {
		Code    int         `json:"code"`
		Message string      `json:"message"`
		Status  string      `json:"status"`
		Details []gemDetail `json:"details,omitempty"`
	}
	in := inner{Code: e.code, Message: e.message, Status: e.status}
	if e.reason != "" {
		in.Details = append(in.Details, gemDetail{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: e.reason,
			Domain: "googleapis.com", Metadata: map[string]string{"service": "generativelanguage.googleapis.com"}})
	}
	if e.code == http.StatusTooManyRequests {
		in.Details = append(in.Details, gemDetail{Type: "type.googleapis.com/google.rpc.QuotaFailure", Violations: []gemViolation{{
			QuotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_requests",
			QuotaID:     "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}}})
	}
	if e.retryDelay != "" {
		in.Details = append(in.Details, gemDetail{Type: "type.googleapis.com/google.rpc.RetryInfo", RetryDelay: e.retryDelay})
	}
	b, _ := json.MarshalIndent(struct {
		Error inner `json:"error"`
	}{in}, "", "  ")
	return append(b, '\n')
}

// gemStatus names the google.rpc.Code Google sends with each HTTP status.
func gemStatus(code int) string {
	switch code {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

func gemInvalid(format string, args ...any) *gemError {
	return &gemError{code: 400, status: "INVALID_ARGUMENT", message: fmt.Sprintf(format, args...)}
}

var (
	gemNoKey = &gemError{code: 403, status: "PERMISSION_DENIED",
		message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}
	gemBadKey = &gemError{code: 400, status: "INVALID_ARGUMENT", reason: "API_KEY_INVALID",
		message: "API key not valid. Please pass a valid API key."}
)

func gemModelNotFound(model, method string) *gemError {
	return &gemError{code: 404, status: "NOT_FOUND",
		message: "models/" + model + " is not found for API version v1beta, or is not supported for " + method +
			". Call ListModels to see the list of available models and their supported methods."}
}

// gemInjected is the error Gemini sends for status, for injected failures.
func gemInjected(status int, model, retryAfter string) *gemError {
	e := &gemError{code: status, status: gemStatus(status), retryAfter: retryAfter}
	switch status {
	case 429:
		e.message = "You exceeded your current quota, please check your plan and billing details. " +
			"For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
		delay := retryAfter
		if delay == "" {
			delay = "1"
		}
		if _, err := strconv.ParseFloat(delay, 64); err == nil {
			e.retryDelay = delay + "s"
		}
	case 403:
		e.message = "The caller does not have permission"
	case 404:
		return gemModelNotFound(model, "generateContent")
	case 500:
		e.message = "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting"
	case 503:
		e.message = "The model is overloaded. Please try again later."
	case 504:
		e.message = "Deadline expired before operation could complete."
	default:
		e.message = "mockllm injected error: " + strconv.Itoa(status) + " " + http.StatusText(status) + "."
	}
	if e.retryAfter != "" && e.code != 429 {
		e.retryDelay = ""
	}
	return e
}

// Google's front end answers with these on every response.
var (
	hdrGemJSON   = []string{"application/json; charset=UTF-8"}
	hdrGemSSE    = []string{"text/event-stream"}
	hdrGemVary   = []string{"Origin", "X-Origin", "Referer"}
	hdrGemServer = []string{"scaffolding on HTTPServer2"}
	hdrAttach    = []string{"attachment"}
	hdrNoSniff   = []string{"nosniff"}
)

func (c *call) gemHeaders(h http.Header, contentType []string) {
	h["Content-Type"] = contentType
	h["Vary"] = hdrGemVary
	h["Server"] = hdrGemServer
	h["X-Content-Type-Options"] = hdrNoSniff
	h["Server-Timing"] = []string{"gfet4t7; dur=" + itoa(int(time.Since(c.received).Milliseconds()))}
}

// gemWrite sends a whole JSON response.
func (c *call) gemWrite(status int, body []byte) {
	h := c.w.Header()
	c.gemHeaders(h, hdrGemJSON)
	c.writeWhole(status, body)
}

func (c *call) gemFail(e *gemError) {
	if e.retryAfter != "" {
		c.w.Header()["Retry-After"] = []string{e.retryAfter}
	}
	c.gemWrite(e.code, e.body())
}

func (s *Server) gemAuthorized(c *call) bool {
	if s.opts.APIKey == "" {
		return true
	}
	key := c.r.Header.Get("X-Goog-Api-Key")
	if key == "" {
		key = c.r.URL.Query().Get("key")
	}
	switch key {
	case s.opts.APIKey:
		return true
	case "":
		c.gemFail(gemNoKey)
	default:
		c.gemFail(gemBadKey)
	}
	return false
}

// serveGemini routes /v1beta/models….
func (s *Server) serveGemini(c *call, body []byte) {
	if !s.gemAuthorized(c) {
		return
	}
	r := c.r
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/v1beta/models"), "/")
	if rest == "" {
		if r.Method != http.MethodGet {
			c.gemFail(&gemError{code: 405, status: "UNIMPLEMENTED", message: "Method not allowed: " + r.Method + " " + r.URL.Path})
			return
		}
		c.gemWrite(http.StatusOK, s.gemModelList())
		return
	}
	model, method, hasMethod := strings.Cut(rest, ":")
	c.model = model
	switch {
	case !hasMethod && r.Method == http.MethodGet:
		s.gemModel(c, model)
	case hasMethod && r.Method == http.MethodPost && (method == "generateContent" || method == "streamGenerateContent"):
		s.gemGenerate(c, model, method == "streamGenerateContent", body)
	case hasMethod && r.Method == http.MethodPost && (method == "embedContent" || method == "batchEmbedContents"):
		s.gemEmbed(c, model, method == "batchEmbedContents", body)
	default:
		c.gemFail(&gemError{code: 404, status: "NOT_FOUND", message: "Method not found: " + r.Method + " " + r.URL.Path})
	}
}

type gemModelInfo struct {
	Name                       string   `json:"name"`
	Version                    string   `json:"version"`
	DisplayName                string   `json:"displayName"`
	Description                string   `json:"description"`
	InputTokenLimit            int      `json:"inputTokenLimit"`
	OutputTokenLimit           int      `json:"outputTokenLimit"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
	Temperature                *float64 `json:"temperature,omitempty"`
	TopP                       *float64 `json:"topP,omitempty"`
	TopK                       *int     `json:"topK,omitempty"`
	MaxTemperature             *float64 `json:"maxTemperature,omitempty"`
	Thinking                   bool     `json:"thinking,omitempty"`
}

func gemModelInfoFor(id string) gemModelInfo {
	m := gemModelInfo{Name: "models/" + id, Version: "001", DisplayName: id, Description: "mockllm emulation of " + id}
	if strings.Contains(id, "embedding") {
		m.InputTokenLimit, m.OutputTokenLimit = 2048, 1
		m.SupportedGenerationMethods = []string{"embedContent", "countTextTokens", "countTokens", "asyncBatchEmbedContent"}
		return m
	}
	one, topP, topK, two := 1.0, 0.95, 64, 2.0
	m.InputTokenLimit, m.OutputTokenLimit = 1048576, 65536
	m.SupportedGenerationMethods = []string{"generateContent", "countTokens", "createCachedContent", "batchGenerateContent"}
	m.Temperature, m.TopP, m.TopK, m.MaxTemperature = &one, &topP, &topK, &two
	m.Thinking = strings.HasPrefix(id, "gemini-2.5") || strings.HasPrefix(id, "gemini-3")
	return m
}

func (s *Server) gemModelIDs() []string {
	if len(s.opts.Models) > 0 {
		return s.opts.Models
	}
	return geminiModels
}

func (s *Server) gemModelList() []byte {
	ids := s.gemModelIDs()
	list := make([]gemModelInfo, len(ids))
	for i, id := range ids {
		list[i] = gemModelInfoFor(id)
	}
	b, _ := json.MarshalIndent(struct {
		Models []gemModelInfo `json:"models"`
	}{list}, "", "  ")
	return append(b, '\n')
}

func (s *Server) gemModel(c *call, id string) {
	for _, m := range s.gemModelIDs() {
		if m == id {
			b, _ := json.MarshalIndent(gemModelInfoFor(id), "", "  ")
			c.gemWrite(http.StatusOK, append(b, '\n'))
			return
		}
	}
	c.gemFail(&gemError{code: 404, status: "NOT_FOUND", message: "models/" + id + " is not found for API version v1beta"})
}

// gemDecode decodes body strictly, answering as Gemini does for unknown
// fields and wrong types.
func gemDecode(body []byte, v any) *gemError {
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return gemInvalid("Invalid JSON payload received. Unknown name %s: Cannot find field.", name)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return gemInvalid("Invalid value at '%s' (%s), %s", te.Field, te.Type, te.Value)
	}
	return gemInvalid("Invalid JSON payload received. %s", strings.TrimPrefix(msg, "json: "))
}

// Embeddings.

type gemEmbedRequest struct {
	Model                string      `json:"model"`
	Content              *gemContent `json:"content"`
	TaskType             string      `json:"taskType"`
	Title                string      `json:"title"`
	OutputDimensionality *int        `json:"outputDimensionality"`
}

const gemDefaultDimensions = 3072

func (s *Server) gemEmbed(c *call, model string, batch bool, body []byte) {
	var reqs []gemEmbedRequest
	what := "EmbedContentRequest"
	if batch {
		var b struct {
			Requests []gemEmbedRequest `json:"requests"`
		}
		if e := gemDecode(body, &b); e != nil {
			c.gemFail(e)
			return
		}
		what = "BatchEmbedContentsRequest.requests"
		if len(b.Requests) == 0 {
			c.gemFail(gemInvalid("* BatchEmbedContentsRequest.requests: contents is not specified\n"))
			return
		}
		if len(b.Requests) > 100 {
			c.gemFail(gemInvalid("* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch\n"))
			return
		}
		reqs = b.Requests
	} else {
		var one gemEmbedRequest
		if e := gemDecode(body, &one); e != nil {
			c.gemFail(e)
			return
		}
		reqs = []gemEmbedRequest{one}
	}
	for i, r := range reqs {
		at := what
		if batch {
			at += "[" + itoa(i) + "]"
		}
		if batch && r.Model != "models/"+model {
			c.gemFail(gemInvalid("* %s.model: model %q must be the model of the request URL, models/%s\n", at, r.Model, model))
			return
		}
		if r.Content == nil || len(r.Content.Parts) == 0 {
			c.gemFail(gemInvalid("* %s.content: contents is not specified\n", at))
			return
		}
		for _, p := range r.Content.Parts {
			if p.Text == nil || *p.Text == "" {
				c.gemFail(gemInvalid("* %s.content.parts: only non-empty text parts can be embedded\n", at))
				return
			}
		}
		if d := r.OutputDimensionality; d != nil && (*d < 1 || *d > gemDefaultDimensions) {
			c.gemFail(gemInvalid("* %s.output_dimensionality: must be between 1 and %d\n", at, gemDefaultDimensions))
			return
		}
	}
	var all strings.Builder // where a @mock(...) directive arms a fault
	for _, r := range reqs {
		for _, p := range r.Content.Parts {
			all.WriteString(*p.Text)
			all.WriteByte('\n')
		}
	}
	p, perr := s.newPlan(c, all.String())
	if perr != nil {
		c.gemFail(gemInvalid("%s", perr.message))
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
		c.gemFail(gemInjected(p.errorStatus, model, p.retryAfter))
		return
	}
	c.armCut(&p)
	texts := make([]string, len(reqs))
	dims := make([]int, len(reqs))
	for i, r := range reqs {
		dims[i] = gemDefaultDimensions
		if r.OutputDimensionality != nil {
			dims[i] = *r.OutputDimensionality
		}
		var text strings.Builder
		for _, p := range r.Content.Parts {
			text.WriteString(*p.Text)
		}
		texts[i] = text.String()
	}
	// Under huge=N every vector has at least the dimensions hugeAnswer
	// settles on; the fewest any asked for give the usual answer.
	b := p.hugeAnswer(slices.Min(dims), func(least int) []byte {
		return gemEmbeddings(texts, dims, least, batch)
	})
	c.gemWrite(http.StatusOK, b)
}

// gemEmbeddings is the answer of embedContent (one text) or
// batchEmbedContents: a vector for each text, of its dims or least
// dimensions, whichever is more.
func gemEmbeddings(texts []string, dims []int, least int, batch bool) []byte {
	type values struct {
		Values []float32 `json:"values"`
	}
	out := make([]values, len(texts))
	for i, text := range texts {
		out[i].Values = make([]float32, max(dims[i], least))
		embed(out[i].Values, embedInput{text: text, isText: true})
	}
	var b []byte
	if batch {
		b, _ = json.MarshalIndent(struct {
			Embeddings []values `json:"embeddings"`
		}{out}, "", "  ")
	} else {
		b, _ = json.MarshalIndent(struct {
			Embedding values `json:"embedding"`
		}{out[0]}, "", "  ")
	}
	return append(b, '\n')
}

// validBase64 reports whether s decodes as base64 (standard or URL-safe,
// padded or not), as Gemini's bytes fields require.
func validBase64(s string) bool {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if _, err := enc.DecodeString(s); err == nil {
			return true
		}
	}
	return false
}

// gemTokens is the mock's token estimate for text: a quarter of its runes.
func gemTokens(s string) int { return (utf8.RuneCountInString(s) + 3) / 4 }
