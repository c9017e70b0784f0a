package mockllm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
)

// The GenerateContentRequest as the Gemini API reference declares it.
// Fields the mock does not act on are still declared, so that strict
// decoding refuses only what Gemini itself would refuse.

type gemRequest struct {
	Model             string          `json:"model"`
	Contents          []gemContent    `json:"contents"`
	SystemInstruction *gemContent     `json:"systemInstruction"`
	Tools             []gemTool       `json:"tools"`
	ToolConfig        *gemToolConfig  `json:"toolConfig"`
	SafetySettings    []gemSafety     `json:"safetySettings"`
	GenerationConfig  *gemGenConfig   `json:"generationConfig"`
	CachedContent     string          `json:"cachedContent"`
	Labels            json.RawMessage `json:"labels"`
}

type gemContent struct {
	Role  string    `json:"role"`
	Parts []gemPart `json:"parts"`
}

type gemPart struct {
	Text                *string            `json:"text"`
	Thought             bool               `json:"thought"`
	ThoughtSignature    string             `json:"thoughtSignature"`
	InlineData          *gemBlob           `json:"inlineData"`
	FileData            *gemFileData       `json:"fileData"`
	FunctionCall        *gemFunctionCall   `json:"functionCall"`
	FunctionResponse    *gemFunctionResult `json:"functionResponse"`
	ExecutableCode      json.RawMessage    `json:"executableCode"`
	CodeExecutionResult json.RawMessage    `json:"codeExecutionResult"`
	VideoMetadata       json.RawMessage    `json:"videoMetadata"`
	PartMetadata        json.RawMessage    `json:"partMetadata"`
	MediaResolution     json.RawMessage    `json:"mediaResolution"`
}

type gemBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type gemFileData struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}

type gemFunctionCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type gemFunctionResult struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Response     json.RawMessage `json:"response"`
	Parts        json.RawMessage `json:"parts"`
	WillContinue *bool           `json:"willContinue"`
	Scheduling   string          `json:"scheduling"`
}

type gemTool struct {
	FunctionDeclarations  []gemFunctionDecl `json:"functionDeclarations"`
	GoogleSearch          json.RawMessage   `json:"googleSearch"`
	GoogleSearchRetrieval json.RawMessage   `json:"googleSearchRetrieval"`
	CodeExecution         json.RawMessage   `json:"codeExecution"`
	URLContext            json.RawMessage   `json:"urlContext"`
}

type gemFunctionDecl struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description"`
	Behavior             string          `json:"behavior"`
	Parameters           json.RawMessage `json:"parameters"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
	Response             json.RawMessage `json:"response"`
	ResponseJSONSchema   json.RawMessage `json:"responseJsonSchema"`
}

type gemToolConfig struct {
	FunctionCallingConfig *struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames"`
	} `json:"functionCallingConfig"`
	RetrievalConfig json.RawMessage `json:"retrievalConfig"`
}

type gemSafety struct {
	Category  string `json:"category"`
	Threshold string `json:"threshold"`
}

type gemGenConfig struct {
	StopSequences              []string        `json:"stopSequences"`
	ResponseMimeType           string          `json:"responseMimeType"`
	ResponseSchema             json.RawMessage `json:"responseSchema"`
	ResponseJSONSchema         json.RawMessage `json:"responseJsonSchema"`
	ResponseModalities         []string        `json:"responseModalities"`
	CandidateCount             *int            `json:"candidateCount"`
	MaxOutputTokens            *int            `json:"maxOutputTokens"`
	Temperature                *float64        `json:"temperature"`
	TopP                       *float64        `json:"topP"`
	TopK                       *int            `json:"topK"`
	Seed                       *int32          `json:"seed"`
	PresencePenalty            *float64        `json:"presencePenalty"`
	FrequencyPenalty           *float64        `json:"frequencyPenalty"`
	ResponseLogprobs           bool            `json:"responseLogprobs"`
	Logprobs                   *int            `json:"logprobs"`
	EnableEnhancedCivicAnswers *bool           `json:"enableEnhancedCivicAnswers"`
	SpeechConfig               json.RawMessage `json:"speechConfig"`
	ImageConfig                json.RawMessage `json:"imageConfig"`
	MediaResolution            string          `json:"mediaResolution"`
	ThinkingConfig             *struct {
		IncludeThoughts bool   `json:"includeThoughts"`
		ThinkingBudget  *int   `json:"thinkingBudget"`
		ThinkingLevel   string `json:"thinkingLevel"`
	} `json:"thinkingConfig"`
}

// Gemini's documented errors for function-calling histories.
const (
	gemCallAfterUser   = "Please ensure that function call turn comes immediately after a user turn or after a function response turn."
	gemResponseAfter   = "Please ensure that function response turn comes immediately after a function call turn."
	gemResponseCount   = "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn."
	gemEmptyText       = "Unable to submit request because it has an empty text parameter. Add a value to the parameter and try again."
	gemInvalidRole     = "Please use a valid role: user, model."
	gemResponseMatches = "Please ensure that the names of the function response parts match the function call parts of the function call turn."
)

var gemFunctionName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}$`)

func hasCall(c *gemContent) (n int) {
	for _, p := range c.Parts {
		if p.FunctionCall != nil {
			n++
		}
	}
	return n
}

func hasResponse(c *gemContent) (n int) {
	for _, p := range c.Parts {
		if p.FunctionResponse != nil {
			n++
		}
	}
	return n
}

// validate checks what Gemini checks before any model runs. Where the
// reference is silent the mock is stricter (function response names must
// match the calls they answer), since a gateway that gets them wrong
// would mislead the real model without an error.
func (q *gemRequest) validate() *gemError {
	if len(q.Contents) == 0 {
		return gemInvalid("* GenerateContentRequest.contents: contents is not specified\n")
	}
	for i := range q.Contents {
		if e := q.validateContent(i); e != nil {
			return e
		}
	}
	if si := q.SystemInstruction; si != nil {
		for j, p := range si.Parts {
			if p.Text == nil {
				return gemInvalid("* GenerateContentRequest.system_instruction.parts[%d]: only text should be provided in system instruction\n", j)
			}
		}
	}
	declared := map[string]*gemFunctionDecl{}
	for i := range q.Tools {
		for j := range q.Tools[i].FunctionDeclarations {
			f := &q.Tools[i].FunctionDeclarations[j]
			at := "tools[" + itoa(i) + "].function_declarations[" + itoa(j) + "]"
			if !gemFunctionName.MatchString(f.Name) {
				return gemInvalid("* GenerateContentRequest.%s.name: Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots, colons and dashes, with a maximum length of 128.\n", at)
			}
			if len(f.Parameters) > 0 && len(f.ParametersJSONSchema) > 0 {
				return gemInvalid("* GenerateContentRequest.%s: parameters and parameters_json_schema must not both be set\n", at)
			}
			if len(f.ParametersJSONSchema) > 0 && !isJSONObject(f.ParametersJSONSchema) {
				return gemInvalid("* GenerateContentRequest.%s.parameters_json_schema: must be a JSON object\n", at)
			}
			declared[f.Name] = f
		}
	}
	if tc := q.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil {
		fc := tc.FunctionCallingConfig
		switch fc.Mode {
		case "", "MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED":
		default:
			return gemInvalid("Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), %q", fc.Mode)
		}
		if len(fc.AllowedFunctionNames) > 0 && fc.Mode != "ANY" && fc.Mode != "VALIDATED" {
			return gemInvalid("* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: allowed_function_names should only be set when the Function Calling mode is ANY.\n")
		}
		for _, n := range fc.AllowedFunctionNames {
			if declared[n] == nil {
				return gemInvalid("* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: function %q is not declared in tools\n", n)
			}
		}
	}
	return q.validateConfig()
}

func (q *gemRequest) validateContent(i int) *gemError {
	c := &q.Contents[i]
	at := "contents[" + itoa(i) + "]"
	switch c.Role {
	case "user", "model":
	case "":
		if len(q.Contents) > 1 {
			return gemInvalid(gemInvalidRole)
		}
	default:
		return gemInvalid(gemInvalidRole)
	}
	if len(c.Parts) == 0 {
		return gemInvalid("* GenerateContentRequest.%s.parts: contents.parts must not be empty.\n", at)
	}
	for j := range c.Parts {
		if e := validatePart(&c.Parts[j], c.Role, at+".parts["+itoa(j)+"]"); e != nil {
			return e
		}
	}
	if calls := hasCall(c); calls > 0 && (i == 0 || q.Contents[i-1].Role != "user") {
		return gemInvalid(gemCallAfterUser)
	}
	if n := hasResponse(c); n > 0 {
		if i == 0 || hasCall(&q.Contents[i-1]) == 0 {
			return gemInvalid(gemResponseAfter)
		}
		prev := &q.Contents[i-1]
		if n != hasCall(prev) {
			return gemInvalid(gemResponseCount)
		}
		want := map[string]int{}
		for _, p := range prev.Parts {
			if p.FunctionCall != nil {
				want[p.FunctionCall.Name]++
			}
		}
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				want[p.FunctionResponse.Name]--
				if want[p.FunctionResponse.Name] < 0 {
					return gemInvalid(gemResponseMatches)
				}
			}
		}
	}
	return nil
}

func validatePart(p *gemPart, role, at string) *gemError {
	set := []string{}
	if p.Text != nil {
		set = append(set, "text")
	}
	if p.InlineData != nil {
		set = append(set, "inline_data")
	}
	if p.FileData != nil {
		set = append(set, "file_data")
	}
	if p.FunctionCall != nil {
		set = append(set, "function_call")
	}
	if p.FunctionResponse != nil {
		set = append(set, "function_response")
	}
	if p.ExecutableCode != nil {
		set = append(set, "executable_code")
	}
	if p.CodeExecutionResult != nil {
		set = append(set, "code_execution_result")
	}
	switch {
	case len(set) == 0:
		return gemInvalid("* GenerateContentRequest.%s.data: required oneof field 'data' must have one initialized field\n", at)
	case len(set) > 1:
		return gemInvalid("Invalid value at '%s.data' (oneof), oneof field 'data' is already set. Cannot overwrite with '%s'", at, set[1])
	}
	switch {
	case p.Text != nil && *p.Text == "" && p.ThoughtSignature == "":
		return gemInvalid(gemEmptyText)
	case p.InlineData != nil:
		if p.InlineData.MimeType == "" {
			return gemInvalid("* GenerateContentRequest.%s.inline_data.mime_type: mime_type must be specified\n", at)
		}
		if !validBase64(p.InlineData.Data) {
			return gemInvalid("Invalid value at '%s.inline_data.data' (TYPE_BYTES), Base64 decoding failed for %q", at, p.InlineData.Data)
		}
	case p.FileData != nil:
		if p.FileData.FileURI == "" {
			return gemInvalid("* GenerateContentRequest.%s.file_data.file_uri: file_uri must be specified\n", at)
		}
	case p.FunctionCall != nil:
		if role != "model" {
			return gemInvalid("* GenerateContentRequest.%s.function_call: function calls can only be made by the model\n", at)
		}
		if p.FunctionCall.Name == "" {
			return gemInvalid("* GenerateContentRequest.%s.function_call.name: Name cannot be empty.\n", at)
		}
		if len(p.FunctionCall.Args) > 0 && !isJSONObject(p.FunctionCall.Args) {
			return gemInvalid("Invalid value at '%s.function_call.args' (type.googleapis.com/google.protobuf.Struct), %s", at, p.FunctionCall.Args)
		}
	case p.FunctionResponse != nil:
		if role != "user" {
			return gemInvalid("* GenerateContentRequest.%s.function_response: function responses must be in a user turn\n", at)
		}
		if p.FunctionResponse.Name == "" {
			return gemInvalid("* GenerateContentRequest.%s.function_response.name: Name cannot be empty.\n", at)
		}
		if !isJSONObject(p.FunctionResponse.Response) {
			return gemInvalid("Invalid value at '%s.function_response.response' (type.googleapis.com/google.protobuf.Struct), %s", at, p.FunctionResponse.Response)
		}
	}
	return nil
}

func (q *gemRequest) validateConfig() *gemError {
	g := q.GenerationConfig
	if g == nil {
		return nil
	}
	const at = "* GenerateContentRequest.generation_config."
	switch {
	case g.Temperature != nil && (*g.Temperature < 0 || *g.Temperature > 2):
		return gemInvalid(at + "temperature: temperature must be in the range [0.0, 2.0]\n")
	case g.TopP != nil && (*g.TopP < 0 || *g.TopP > 1):
		return gemInvalid(at + "top_p: top_p must be in the range [0.0, 1.0]\n")
	case g.CandidateCount != nil && (*g.CandidateCount < 1 || *g.CandidateCount > 8):
		return gemInvalid(at + "candidate_count: candidate_count must be in the range [1, 8]\n")
	case g.MaxOutputTokens != nil && *g.MaxOutputTokens < 1:
		return gemInvalid(at + "max_output_tokens: max_output_tokens must be positive\n")
	case len(g.StopSequences) > 5:
		return gemInvalid(at + "stop_sequences: at most 5 stop sequences are allowed\n")
	case len(g.ResponseSchema) > 0 && len(g.ResponseJSONSchema) > 0:
		return gemInvalid(at + "response_schema: response_schema and response_json_schema must not both be set\n")
	case (len(g.ResponseSchema) > 0 || len(g.ResponseJSONSchema) > 0) && g.ResponseMimeType != "application/json" && g.ResponseMimeType != "text/x.enum":
		return gemInvalid(at + "response_mime_type: response_mime_type must be application/json when a response schema is set\n")
	}
	switch g.ResponseMimeType {
	case "", "text/plain", "application/json", "text/x.enum":
	default:
		return gemInvalid(at+"response_mime_type: allowed mimetypes are `text/plain`, `application/json`, `text/x.enum`, got %q\n", g.ResponseMimeType)
	}
	if tc := g.ThinkingConfig; tc != nil && tc.ThinkingBudget != nil && (*tc.ThinkingBudget < -1 || *tc.ThinkingBudget > 32768) {
		return gemInvalid(at + "thinking_config.thinking_budget: thinking_budget must be in the range [-1, 32768]\n")
	}
	return nil
}

func isJSONObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// gemAnswer is what the mock will say: text, or calls of a declared
// function (the @mock(tool=NAME) directive).
type gemAnswer struct {
	model        string
	thought      string // thought summary, when includeThoughts was asked
	thoughts     int    // thoughtsTokenCount; >0 when thinking is on
	signature    string
	reply        string
	cuts         []int
	calls        []gemCallOut
	finish       string
	promptTokens int
}

type gemCallOut struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// gemGenerate serves generateContent and streamGenerateContent.
func (s *Server) gemGenerate(c *call, model string, stream bool, body []byte) {
	var q gemRequest
	if e := gemDecode(body, &q); e != nil {
		c.gemFail(e)
		return
	}
	if e := q.validate(); e != nil {
		c.gemFail(e)
		return
	}
	lastUser, results := q.lastTurn()
	p, perr := s.newPlan(c, lastUser)
	if perr != nil {
		c.gemFail(gemInvalid("%s", perr.message))
		return
	}
	a, e := s.gemAnswerFor(&q, model, &p, lastUser, results)
	if e != nil {
		c.gemFail(e)
		return
	}
	if p.hang {
		c.block()
		return
	}
	if s.injectError(&p) {
		if c.wait(p.latency) {
			c.gemFail(gemInjected(p.errorStatus, model, p.retryAfter))
		}
		return
	}
	switch {
	case !stream:
		c.gemComplete(a, &p)
	case c.r.URL.Query().Get("alt") == "sse":
		c.gemStream(a, &p, gemSSE)
	default:
		c.gemStream(a, &p, gemArray)
	}
}

// lastTurn returns the text of the last user turn with text (where
// directives live) and, when the conversation ends with function
// responses, those responses.
func (q *gemRequest) lastTurn() (string, []gemFunctionResult) {
	var results []gemFunctionResult
	last := &q.Contents[len(q.Contents)-1]
	for _, p := range last.Parts {
		if p.FunctionResponse != nil {
			results = append(results, *p.FunctionResponse)
		}
	}
	for i := len(q.Contents) - 1; i >= 0; i-- {
		c := &q.Contents[i]
		if c.Role == "model" {
			continue
		}
		var b strings.Builder
		for _, p := range c.Parts {
			if p.Text != nil && !p.Thought {
				b.WriteString(*p.Text)
			}
		}
		if b.Len() > 0 {
			return b.String(), results
		}
	}
	return "", results
}

func (s *Server) gemAnswerFor(q *gemRequest, model string, p *plan, lastUser string, results []gemFunctionResult) (*gemAnswer, *gemError) {
	a := &gemAnswer{model: model, finish: "STOP", promptTokens: q.promptTokens()}
	g := q.GenerationConfig
	if g != nil && g.ThinkingConfig != nil && (g.ThinkingConfig.ThinkingBudget == nil || *g.ThinkingConfig.ThinkingBudget != 0) {
		a.thought = "**Planning the answer**\n\nmockllm considers the request."
		a.thoughts = 3 * gemTokens(a.thought)
		if !g.ThinkingConfig.IncludeThoughts {
			a.thought = ""
		}
		a.signature = base64.StdEncoding.EncodeToString([]byte("mockllm-thought:" + model))
	}
	mode := ""
	if q.ToolConfig != nil && q.ToolConfig.FunctionCallingConfig != nil {
		mode = q.ToolConfig.FunctionCallingConfig.Mode
	}
	if p.tool != "" && len(results) == 0 && mode != "NONE" {
		f := q.function(p.tool)
		if f == nil {
			return nil, gemInvalid("@mock(tool=%s): the request declares no function named %q", p.tool, p.tool)
		}
		a.calls = []gemCallOut{{Name: f.Name, Args: exampleArgs(f)}}
		return a, nil
	}
	switch {
	case p.huge > 0:
		a.reply = hugeReply(p.huge)
	case s.opts.Reply != "":
		a.reply = s.opts.Reply
	case len(results) > 0:
		var b strings.Builder
		b.WriteString("Hello from mockllm, the gatehouse test upstream.")
		for _, r := range results {
			var compact bytes.Buffer
			_ = json.Compact(&compact, r.Response)
			b.WriteString(" Function " + r.Name + " returned " + compact.String() + ".")
		}
		a.reply = b.String()
	default:
		a.reply = defaultReply(lastUser)
	}
	a.cuts = tokenCuts(a.reply)
	if g != nil && g.MaxOutputTokens != nil && *g.MaxOutputTokens < len(a.cuts)-1 {
		n := *g.MaxOutputTokens
		a.cuts = a.cuts[:n+1]
		a.reply = a.reply[:a.cuts[n]]
		a.finish = "MAX_TOKENS"
	}
	return a, nil
}

func (q *gemRequest) function(name string) *gemFunctionDecl {
	for i := range q.Tools {
		for j := range q.Tools[i].FunctionDeclarations {
			if f := &q.Tools[i].FunctionDeclarations[j]; f.Name == name {
				return f
			}
		}
	}
	return nil
}

// exampleArgs fills each required parameter with a value of its type, so
// a called function gets arguments its schema accepts.
func exampleArgs(f *gemFunctionDecl) json.RawMessage {
	schema := f.ParametersJSONSchema
	if len(schema) == 0 {
		schema = f.Parameters
	}
	var sc struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &sc)
	args := map[string]any{}
	for _, name := range sc.Required {
		typ, _ := sc.Properties[name].Type.(string)
		switch strings.ToLower(typ) {
		case "integer", "number":
			args[name] = 1
		case "boolean":
			args[name] = true
		case "array":
			args[name] = []any{}
		case "object":
			args[name] = map[string]any{}
		default:
			args[name] = "mockllm"
		}
	}
	b, _ := json.Marshal(args)
	return b
}

// promptTokens estimates the prompt: text by length, other parts by the
// size of their JSON, images at Gemini's flat 258 tokens.
func (q *gemRequest) promptTokens() int {
	n := 0
	count := func(c *gemContent) {
		n += 3
		for _, p := range c.Parts {
			switch {
			case p.Text != nil:
				n += gemTokens(*p.Text)
			case p.InlineData != nil, p.FileData != nil:
				n += 258
			case p.FunctionCall != nil:
				n += gemTokens(string(p.FunctionCall.Args)) + 3
			case p.FunctionResponse != nil:
				n += gemTokens(string(p.FunctionResponse.Response)) + 3
			}
		}
	}
	for i := range q.Contents {
		count(&q.Contents[i])
	}
	if q.SystemInstruction != nil {
		count(q.SystemInstruction)
	}
	for _, t := range q.Tools {
		for _, f := range t.FunctionDeclarations {
			n += gemTokens(f.Name+f.Description+string(f.ParametersJSONSchema)+string(f.Parameters)) + 3
		}
	}
	return max(n, 1)
}

// The response shapes, in the order Gemini writes their fields.

type gemOut struct {
	Candidates    []gemCandOut `json:"candidates"`
	UsageMetadata gemUsageOut  `json:"usageMetadata"`
	ModelVersion  string       `json:"modelVersion"`
	ResponseID    string       `json:"responseId"`
}

type gemCandOut struct {
	Content      gemContentOut `json:"content"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

type gemContentOut struct {
	Parts []gemPartOut `json:"parts"`
	Role  string       `json:"role"`
}

type gemPartOut struct {
	Text             *string     `json:"text,omitempty"`
	FunctionCall     *gemCallOut `json:"functionCall,omitempty"`
	Thought          bool        `json:"thought,omitempty"`
	ThoughtSignature string      `json:"thoughtSignature,omitempty"`
}

type gemUsageOut struct {
	PromptTokenCount     int           `json:"promptTokenCount"`
	CandidatesTokenCount int           `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount      int           `json:"totalTokenCount"`
	PromptTokensDetails  []gemModality `json:"promptTokensDetails"`
	ThoughtsTokenCount   int           `json:"thoughtsTokenCount,omitempty"`
}

type gemModality struct {
	Modality   string `json:"modality"`
	TokenCount int    `json:"tokenCount"`
}

func (a *gemAnswer) usage(candidates int) gemUsageOut {
	return gemUsageOut{PromptTokenCount: a.promptTokens, CandidatesTokenCount: candidates,
		TotalTokenCount:     a.promptTokens + candidates + a.thoughts,
		PromptTokensDetails: []gemModality{{"TEXT", a.promptTokens}}, ThoughtsTokenCount: a.thoughts}
}

func (a *gemAnswer) candidateTokens() int {
	if len(a.calls) > 0 {
		n := 0
		for _, c := range a.calls {
			n += gemTokens(c.Name+string(c.Args)) + 3
		}
		return n
	}
	return len(a.cuts) - 1
}

func (a *gemAnswer) callParts() []gemPartOut {
	parts := make([]gemPartOut, len(a.calls))
	for i := range a.calls {
		parts[i] = gemPartOut{FunctionCall: &a.calls[i]}
	}
	parts[0].ThoughtSignature = a.signature
	return parts
}

func newResponseID() string {
	b := appendCompletionID(nil)
	return string(b[len("chatcmpl-") : len("chatcmpl-")+23])
}

// gemComplete writes the generateContent response, pretty-printed as
// Google's front end prints it.
func (c *call) gemComplete(a *gemAnswer, p *plan) {
	if !c.wait(p.latency) {
		return
	}
	var parts []gemPartOut
	if a.thought != "" {
		parts = append(parts, gemPartOut{Text: &a.thought, Thought: true})
	}
	if len(a.calls) > 0 {
		parts = append(parts, a.callParts()...)
	} else {
		reply := a.reply
		parts = append(parts, gemPartOut{Text: &reply, ThoughtSignature: a.signature})
	}
	out := gemOut{Candidates: []gemCandOut{{Content: gemContentOut{Parts: parts, Role: "model"}, FinishReason: a.finish}},
		UsageMetadata: a.usage(a.candidateTokens()), ModelVersion: a.model, ResponseID: newResponseID()}
	b, _ := json.MarshalIndent(out, "", "  ")
	b = append(b, '\n')
	if p.stallAfter < 0 && p.failAfter < 0 {
		c.gemWrite(http.StatusOK, b)
		return
	}
	h := c.w.Header()
	c.gemHeaders(h, hdrGemJSON)
	h["Content-Length"] = []string{itoa(len(b))}
	c.w.WriteHeader(http.StatusOK)
	if c.write(b[:len(b)/2]) {
		c.breakOff(p.failAfter >= 0)
	}
}
