package mockllm

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

const gemKey = "AIza-mock-key"

func gemDo(t *testing.T, ts interface{ Client() *http.Client }, url, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	method := http.MethodPost
	if body == "" {
		method = http.MethodGet
	}
	if hdr == nil {
		hdr = map[string]string{"x-goog-api-key": gemKey}
	}
	resp, err := ts.Client().Do(newRequest(t, context.Background(), method, url, body, hdr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, b
}

type gemErrorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type       string `json:"@type"`
			Reason     string `json:"reason"`
			RetryDelay string `json:"retryDelay"`
		} `json:"details"`
	} `json:"error"`
}

func gemDecodeError(t *testing.T, b []byte) gemErrorBody {
	t.Helper()
	var e gemErrorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == 0 || e.Error.Message == "" || e.Error.Status == "" {
		t.Fatalf("not a Google error body (%v): %s", err, b)
	}
	return e
}

const gemHello = `{"contents":[{"role":"user","parts":[{"text":"Hello there"}]}]}`

func TestGeminiAPIKey(t *testing.T) {
	_, ts := start(t, Options{APIKey: gemKey})
	url := ts.URL + "/v1beta/models/gemini-2.5-flash:generateContent"
	for _, c := range []struct {
		name   string
		url    string
		hdr    map[string]string
		status int
		grpc   string
	}{
		{"header", url, map[string]string{"x-goog-api-key": gemKey}, 200, ""},
		{"query", url + "?key=" + gemKey, map[string]string{}, 200, ""},
		{"missing", url, map[string]string{}, 403, "PERMISSION_DENIED"},
		{"wrong", url, map[string]string{"x-goog-api-key": "AIza-other"}, 400, "INVALID_ARGUMENT"},
		{"bearer is not how Gemini authenticates", url, map[string]string{"Authorization": "Bearer " + gemKey}, 403, "PERMISSION_DENIED"},
	} {
		resp, b := gemDo(t, ts, c.url, gemHello, c.hdr)
		if resp.StatusCode != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, resp.StatusCode, c.status, b)
			continue
		}
		if c.grpc != "" {
			e := gemDecodeError(t, b)
			if e.Error.Status != c.grpc || e.Error.Code != c.status {
				t.Errorf("%s: %+v", c.name, e)
			}
		}
	}
}

func TestGeminiGenerateContent(t *testing.T) {
	_, ts := start(t, Options{APIKey: gemKey})
	resp, b := gemDo(t, ts, ts.URL+"/v1beta/models/gemini-2.5-flash:generateContent", gemHello, nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json; charset=UTF-8" {
		t.Fatalf("%d %v: %s", resp.StatusCode, resp.Header, b)
	}
	if !strings.HasPrefix(string(b), "{\n  \"candidates\": [\n") {
		t.Errorf("not pretty-printed as Google prints: %s", b)
	}
	var out gemOut
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	c := out.Candidates[0]
	if c.FinishReason != "STOP" || c.Content.Role != "model" || !strings.Contains(*c.Content.Parts[0].Text, "You said: Hello there") {
		t.Fatalf("candidate %+v", c)
	}
	u := out.UsageMetadata
	if u.PromptTokenCount == 0 || u.CandidatesTokenCount != len(tokenCuts(*c.Content.Parts[0].Text))-1 ||
		u.TotalTokenCount != u.PromptTokenCount+u.CandidatesTokenCount || out.ModelVersion != "gemini-2.5-flash" || out.ResponseID == "" {
		t.Fatalf("usage %+v model %q id %q", u, out.ModelVersion, out.ResponseID)
	}
}

func TestGeminiValidation(t *testing.T) {
	_, ts := start(t, Options{})
	call := `{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]}`
	result := func(name string) string {
		return `{"role":"user","parts":[{"functionResponse":{"name":"` + name + `","response":{"ok":true}}}]}`
	}
	user := `{"role":"user","parts":[{"text":"hi"}]}`
	for _, c := range []struct{ body, says string }{
		{`{}`, "contents is not specified"},
		{`{"messages":[]}`, `Unknown name "messages"`},
		{`{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"max_tokens":5}}`, `Unknown name "max_tokens"`},
		{`{"contents":[{"role":"assistant","parts":[{"text":"x"}]},` + user + `]}`, "valid role"},
		{`{"contents":[{"role":"user","parts":[]}]}`, "parts must not be empty"},
		{`{"contents":[{"role":"user","parts":[{}]}]}`, "required oneof field 'data'"},
		{`{"contents":[{"role":"user","parts":[{"text":"a","inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`, "oneof field 'data' is already set"},
		{`{"contents":[{"role":"user","parts":[{"text":""}]}]}`, "empty text parameter"},
		{`{"contents":[{"role":"user","parts":[{"inlineData":{"mimeType":"image/png","data":"%%%"}}]}]}`, "Base64 decoding failed"},
		{`{"contents":[` + call + `,` + result("f") + `]}`, gemCallAfterUser},
		{`{"contents":[` + user + `,` + result("f") + `]}`, gemResponseAfter},
		{`{"contents":[` + user + `,` + call + `,` + result("f") + `,` + result("f") + `]}`, gemResponseAfter},
		{`{"contents":[` + user + `,{"role":"model","parts":[{"functionCall":{"name":"f"}},{"functionCall":{"name":"g"}}]},` + result("f") + `]}`, gemResponseCount},
		{`{"contents":[` + user + `,` + call + `,` + result("g") + `]}`, gemResponseMatches},
		{`{"contents":[` + user + `,` + call + `,{"role":"user","parts":[{"functionResponse":{"name":"f","response":"ok"}}]}]}`, "google.protobuf.Struct"},
		{`{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT"},"parametersJsonSchema":{"type":"object"}}]}]}`, "must not both be set"},
		{`{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"f"}]}],"toolConfig":{"functionCallingConfig":{"mode":"AUTO","allowedFunctionNames":["f"]}}}`, "only be set when the Function Calling mode is ANY"},
		{`{"contents":[` + user + `],"generationConfig":{"responseJsonSchema":{"type":"object"}}}`, "response_mime_type must be application/json"},
		{`{"contents":[` + user + `],"generationConfig":{"temperature":3}}`, "temperature must be in the range"},
		{`{"contents":[` + user + `],"generationConfig":{"seed":9999999999}}`, "Invalid value at"},
		{`{"contents":[` + user + `],"systemInstruction":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}}`, "only text"},
	} {
		resp, b := gemDo(t, ts, ts.URL+"/v1beta/models/gemini-2.5-flash:generateContent", c.body, map[string]string{})
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400: %s", c.body, resp.StatusCode, b)
			continue
		}
		if e := gemDecodeError(t, b); !strings.Contains(e.Error.Message, c.says) || e.Error.Status != "INVALID_ARGUMENT" {
			t.Errorf("%s: message %q, want it to say %q", c.body, e.Error.Message, c.says)
		}
	}
	// A valid tool round trip passes: function call after a user turn,
	// its response right after it, then more text.
	ok := `{"contents":[` + user + `,` + call + `,` + result("f") + `,{"role":"model","parts":[{"text":"done"}]},` + user + `]}`
	if resp, b := gemDo(t, ts, ts.URL+"/v1beta/models/gemini-2.5-flash:generateContent", ok, map[string]string{}); resp.StatusCode != 200 {
		t.Fatalf("valid history refused: %s", b)
	}
}

const gemToolRequest = `{"contents":[{"role":"user","parts":[{"text":"Weather? @mock(tool=get_weather)"}]}],` +
	`"tools":[{"functionDeclarations":[{"name":"get_weather","parametersJsonSchema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}]}]}`

func TestGeminiToolDirective(t *testing.T) {
	_, ts := start(t, Options{})
	url := ts.URL + "/v1beta/models/gemini-2.5-flash:generateContent"
	_, b := gemDo(t, ts, url, gemToolRequest, map[string]string{})
	var out gemOut
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	p := out.Candidates[0].Content.Parts
	var args bytes.Buffer
	if len(p) == 1 && p[0].FunctionCall != nil {
		_ = json.Compact(&args, p[0].FunctionCall.Args)
	}
	if len(p) != 1 || p[0].FunctionCall == nil || p[0].FunctionCall.Name != "get_weather" || args.String() != `{"city":"mockllm","days":1}` {
		t.Fatalf("parts %s", b)
	}
	// The result goes back: the mock answers with text quoting it.
	round := `{"contents":[{"role":"user","parts":[{"text":"Weather? @mock(tool=get_weather)"}]},` +
		`{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris","days":1}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"temp_c":21}}}]}],` +
		`"tools":[{"functionDeclarations":[{"name":"get_weather"}]}]}`
	_, b = gemDo(t, ts, url, round, map[string]string{})
	if !strings.Contains(string(b), `Function get_weather returned {\"temp_c\":21}.`) {
		t.Fatalf("reply to the result: %s", b)
	}
	// Calling an undeclared function is the test author's mistake.
	resp, b := gemDo(t, ts, url, strings.Replace(gemToolRequest, "tool=get_weather", "tool=nope", 1), map[string]string{})
	if resp.StatusCode != 400 || !strings.Contains(string(b), "declares no function") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

func gemEvents(t *testing.T, body []byte) []gemOut {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\r\n\r\n") {
		t.Fatalf("stream does not end with \\r\\n\\r\\n: %q", s)
	}
	var out []gemOut
	for ev := range strings.SplitSeq(strings.TrimSuffix(s, "\r\n\r\n"), "\r\n\r\n") {
		data, ok := strings.CutPrefix(ev, "data: {\"candidates\": [")
		if !ok || strings.ContainsAny(data, "\r\n") {
			t.Fatalf("malformed event %q", ev)
		}
		var g gemOut
		if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

func TestGeminiStream(t *testing.T) {
	_, ts := start(t, Options{Chunks: 4})
	url := ts.URL + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
	resp, b := gemDo(t, ts, url, gemHello, map[string]string{})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Content-Disposition") != "attachment" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	evs := gemEvents(t, b)
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4", len(evs))
	}
	var text string
	for i, ev := range evs {
		c := ev.Candidates[0]
		text += *c.Content.Parts[0].Text
		if (c.FinishReason != "") != (i == len(evs)-1) {
			t.Errorf("event %d finish %q", i, c.FinishReason)
		}
		if ev.ResponseID != evs[0].ResponseID || ev.UsageMetadata.PromptTokenCount == 0 {
			t.Errorf("event %d: %+v", i, ev)
		}
	}
	_, whole := gemDo(t, ts, ts.URL+"/v1beta/models/gemini-2.5-flash:generateContent", gemHello, map[string]string{})
	var g gemOut
	_ = json.Unmarshal(whole, &g)
	if text != *g.Candidates[0].Content.Parts[0].Text || evs[3].UsageMetadata.CandidatesTokenCount != g.UsageMetadata.CandidatesTokenCount {
		t.Fatalf("streamed %q / %+v, whole %q / %+v", text, evs[3].UsageMetadata, *g.Candidates[0].Content.Parts[0].Text, g.UsageMetadata)
	}
	// Google's spacing: a space after colons, none after commas.
	if !strings.HasPrefix(string(b), `data: {"candidates": [{"content": {"parts": [{"text": "`) {
		t.Fatalf("spacing: %.80s", b)
	}
}

func TestGeminiStreamThinkingAndTools(t *testing.T) {
	_, ts := start(t, Options{})
	url := ts.URL + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
	body := `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":1024,"includeThoughts":true},"maxOutputTokens":3}}`
	_, b := gemDo(t, ts, url, body, map[string]string{})
	evs := gemEvents(t, b)
	first, last := evs[0].Candidates[0], evs[len(evs)-1].Candidates[0]
	if !first.Content.Parts[0].Thought || last.FinishReason != "MAX_TOKENS" || last.Content.Parts[0].ThoughtSignature == "" {
		t.Fatalf("events %s", b)
	}
	if u := evs[len(evs)-1].UsageMetadata; u.ThoughtsTokenCount == 0 || u.CandidatesTokenCount != 3 ||
		u.TotalTokenCount != u.PromptTokenCount+u.CandidatesTokenCount+u.ThoughtsTokenCount {
		t.Fatalf("usage %+v", u)
	}
	_, b = gemDo(t, ts, url, gemToolRequest, map[string]string{})
	evs = gemEvents(t, b)
	if len(evs) != 1 || evs[0].Candidates[0].Content.Parts[0].FunctionCall == nil || evs[0].Candidates[0].FinishReason != "STOP" {
		t.Fatalf("tool stream %s", b)
	}
}

func TestGeminiStreamJSONArray(t *testing.T) {
	_, ts := start(t, Options{Chunks: 3})
	_, b := gemDo(t, ts, ts.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", gemHello, map[string]string{})
	var arr []gemOut
	if err := json.Unmarshal(b, &arr); err != nil || len(arr) != 3 {
		t.Fatalf("%v: %s", err, b)
	}
}

func TestGeminiInjectedErrors(t *testing.T) {
	_, ts := start(t, Options{})
	url := ts.URL + "/v1beta/models/gemini-2.5-flash:generateContent"
	resp, b := gemDo(t, ts, url, gemHello, map[string]string{"X-Mock-Error-Status": "429", "X-Mock-Retry-After": "3"})
	e := gemDecodeError(t, b)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || e.Error.Status != "RESOURCE_EXHAUSTED" {
		t.Fatalf("%d %v %+v", resp.StatusCode, resp.Header, e)
	}
	delay := ""
	for _, d := range e.Error.Details {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			delay = d.RetryDelay
		}
	}
	if delay != "3s" {
		t.Fatalf("retryDelay %q: %s", delay, b)
	}
	body := `{"contents":[{"role":"user","parts":[{"text":"x @mock(error_status=503)"}]}]}`
	resp, b = gemDo(t, ts, url, body, map[string]string{})
	if e := gemDecodeError(t, b); resp.StatusCode != 503 || e.Error.Status != "UNAVAILABLE" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

func TestGeminiFailAfterAndCancel(t *testing.T) {
	s, ts := start(t, Options{TokensPerSecond: 5})
	url := ts.URL + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
	resp, err := ts.Client().Do(newRequest(t, context.Background(), "POST", url, gemHello, map[string]string{"X-Mock-Fail-After": "1", "X-Mock-Tps": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatal("fail_after did not cut the stream")
	}
	ctx, cancel := context.WithCancel(context.Background())
	resp, err = ts.Client().Do(newRequest(t, ctx, "POST", url, gemHello, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	cancel()
	c := waitCancellation(t, s)
	if c.Model != "gemini-2.5-flash" || !strings.HasSuffix(c.Path, ":streamGenerateContent") {
		t.Fatalf("cancellation %+v", c)
	}
}

func TestGeminiEmbeddings(t *testing.T) {
	_, ts := start(t, Options{})
	base := ts.URL + "/v1beta/models/gemini-embedding-001"
	batch := `{"requests":[{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"a"}]},"outputDimensionality":8},` +
		`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"b"}]}}]}`
	_, b := gemDo(t, ts, base+":batchEmbedContents", batch, map[string]string{})
	var out struct {
		Embeddings []struct {
			Values []float32 `json:"values"`
		} `json:"embeddings"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Embeddings) != 2 || len(out.Embeddings[0].Values) != 8 || len(out.Embeddings[1].Values) != gemDefaultDimensions {
		t.Fatalf("%v: %.200s", err, b)
	}
	_, b = gemDo(t, ts, base+":embedContent", `{"content":{"parts":[{"text":"a"}]},"outputDimensionality":8}`, map[string]string{})
	var one struct {
		Embedding struct {
			Values []float32 `json:"values"`
		} `json:"embedding"`
	}
	if err := json.Unmarshal(b, &one); err != nil || one.Embedding.Values[0] != out.Embeddings[0].Values[0] {
		t.Fatalf("same text, different vector: %s", b)
	}
	resp, b := gemDo(t, ts, base+":batchEmbedContents", `{"requests":[{"model":"models/other","content":{"parts":[{"text":"a"}]}}]}`, map[string]string{})
	if resp.StatusCode != 400 || !strings.Contains(string(b), "models/gemini-embedding-001") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

func TestGeminiModels(t *testing.T) {
	_, ts := start(t, Options{})
	_, b := gemDo(t, ts, ts.URL+"/v1beta/models", "", map[string]string{})
	var list struct {
		Models []gemModelInfo `json:"models"`
	}
	if err := json.Unmarshal(b, &list); err != nil || len(list.Models) != len(geminiModels) || list.Models[0].Name != "models/gemini-2.5-flash" {
		t.Fatalf("%v %s", err, b)
	}
	resp, _ := gemDo(t, ts, ts.URL+"/v1beta/models/gemini-2.0-flash", "", map[string]string{})
	if resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	resp, b = gemDo(t, ts, ts.URL+"/v1beta/models/nope", "", map[string]string{})
	if e := gemDecodeError(t, b); resp.StatusCode != 404 || e.Error.Status != "NOT_FOUND" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	// The OpenAI routes are untouched by the dialect.
	if resp, _ := gemDo(t, ts, ts.URL+"/v1/models", "", map[string]string{}); resp.StatusCode != 200 {
		t.Fatalf("/v1/models: %d", resp.StatusCode)
	}
}
