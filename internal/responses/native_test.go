package responses

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/llm"
)

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

// TestNativeBody: a pass-through body is the client's, member for
// member, but for the model; a continuation puts the stored conversation
// (without item ids, and without reasoning that has no encrypted
// content) in place of previous_response_id.
func TestNativeBody(t *testing.T) {
	r := mustParse(t, `{"model":"gpt","input":"hi","tools":[{"type":"web_search"}],"store":true,  "frob":{"a":1}}`)
	got, err := r.NativeBody("gpt-4.1-2025-04-14", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"gpt-4.1-2025-04-14","input":"hi","tools":[{"type":"web_search"}],"store":true,"frob":{"a":1}}`; string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	prior := []byte(`[{"type":"message","role":"user","content":"Weather?"},` +
		`{"id":"rs_1","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"x"}]},` +
		`{"id":"rs_2","type":"reasoning","summary":[],"encrypted_content":"enc"},` +
		`{"id":"fc_1","type":"function_call","call_id":"c1","name":"w","arguments":"{}","status":"completed"}]`)
	r = mustParse(t, `{"previous_response_id":"resp_1","model":"gpt","input":[{"type":"function_call_output","call_id":"c1","output":"21C"}],"stream":true}`)
	got, err = r.NativeBody("gpt-x", prior)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(got, &body); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if _, ok := body["previous_response_id"]; ok || string(body["model"]) != `"gpt-x"` || string(body["stream"]) != "true" {
		t.Fatalf("body %s", got)
	}
	want := `[{"content":"Weather?","role":"user","type":"message"},{"encrypted_content":"enc","summary":[],"type":"reasoning"},` +
		`{"arguments":"{}","call_id":"c1","name":"w","status":"completed","type":"function_call"},` +
		`{"type":"function_call_output","call_id":"c1","output":"21C"}]`
	if d := cmp.Diff(want, string(body["input"])); d != "" {
		t.Fatalf("input (-want +got):\n%s", d)
	}
	// A continuation with no input of its own still sends the conversation.
	r = mustParse(t, `{"model":"gpt","previous_response_id":"resp_1"}`)
	if got, err = r.NativeBody("m", prior); err != nil || !bytes.Contains(got, []byte(`"input":[{"content":"Weather?"`)) {
		t.Fatalf("%v %s", err, got)
	}
}

func TestUsageOf(t *testing.T) {
	u, ok := UsageOf(readFile(t, "testdata/native/reasoning.json"))
	want := llm.Usage{PromptTokens: 71, CompletionTokens: 150, TotalTokens: 221, CachedTokens: 64, ReasoningTokens: 128}
	if !ok || u != want {
		t.Fatalf("usage %+v %v, want %+v", u, ok, want)
	}
	if _, ok := UsageOf([]byte(`{"usage":null}`)); ok {
		t.Fatal("null usage read as usage")
	}
}

// TestToChat: what the cache keeps of a pass-through answer is the chat
// completion a translated backend would have given.
func TestToChat(t *testing.T) {
	chat, ok := ToChat(readFile(t, "testdata/native/reasoning.json"))
	if !ok {
		t.Fatal("not kept")
	}
	var c llm.ChatCompletion
	if err := json.Unmarshal(chat, &c); err != nil {
		t.Fatal(err)
	}
	m := c.Choices[0].Message
	if c.Model != "o4-mini-2025-04-16" || *m.Content != "Let me check." || m.ReasoningContent != "**Checking the weather**" ||
		m.ReasoningSignature != "gAAAAABor-encrypted" || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != "call_Qh2Z3tX9" ||
		c.Choices[0].FinishReason != llm.FinishToolCalls || c.Usage.Usage().ReasoningTokens != 128 {
		t.Fatalf("chat %s", chat)
	}
	// And back: the response a hit is served as says the same.
	r := mustParse(t, `{"model":"m","input":"hi","include":["reasoning.encrypted_content"]}`)
	e, err := EncodeResponse(chat, r, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"encrypted_content":"gAAAAABor-encrypted"`, `"text":"Let me check."`, `"call_id":"call_Qh2Z3tX9"`, `"reasoning_tokens":128`} {
		if !bytes.Contains(e.Body, []byte(want)) {
			t.Errorf("re-encoded response lacks %s: %s", want, e.Body)
		}
	}

	chat, ok = ToChat(readFile(t, "testdata/native/incomplete.json"))
	if !ok || !bytes.Contains(chat, []byte(`"finish_reason":"length"`)) {
		t.Fatalf("incomplete: %v %s", ok, chat)
	}
	if _, ok := ToChat(readFile(t, "testdata/native/builtin.json")); ok {
		t.Fatal("an answer with a built-in tool's item was kept as a chat completion")
	}
	if _, ok := ToChat([]byte(`{"status":"failed","output":[]}`)); ok {
		t.Fatal("a failed response was kept")
	}
}

func TestReadNative(t *testing.T) {
	if _, has, err := ReadNative(readFile(t, "testdata/native/reasoning.json"), "p"); err != nil || !has {
		t.Fatalf("%v %v", has, err)
	}
	inner := `{"error":{"message":"The model failed.","type":"server_error","param":null,"code":"server_error"}}`
	if _, _, err := ReadNative([]byte(inner), "p"); llm.AsError(err).Status != 502 || llm.AsError(err).Message != "The model failed." ||
		llm.AsError(err).Kind != llm.KindUpstreamStatus {
		t.Errorf("an error object under a 200: %v, want a 502 with the provider's message", err)
	}
	whole := string(readFile(t, "testdata/native/reasoning.json"))
	// Cut short under a matching Content-Length: it still starts with its id.
	half := whole[:len(whole)/2]
	for _, bad := range []string{`[]`, `{"object":"response"}`, `not json`, half} {
		if _, _, err := ReadNative([]byte(bad), "p"); err == nil || llm.AsError(err).Status != 502 {
			t.Errorf("%.60s: %v, want a 502", bad, err)
		}
	}
}

func nativeResponse(body string) *http.Response {
	return &http.Response{Body: io.NopCloser(strings.NewReader(body))}
}

// TestNativeRelay reads a recorded stream through NativeStream and writes
// it back through NativeEncoder: the client gets the events byte for byte
// but for the cost in the terminal usage; the usage, the finished
// response and the text are read on the way.
func TestNativeRelay(t *testing.T) {
	in := string(readFile(t, "testdata/native/text.sse")) + "\n\n"
	st := NewNativeStream(nativeResponse(in))
	var completed []byte
	enc := &NativeEncoder{UsageCost: func(llm.Usage) string { return "0.0042" }, OnComplete: func(r []byte) { completed = r }, Stream: st}
	var out []byte
	var usage *llm.Usage
	for {
		c, err := st.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		if out, err = enc.Chunk(out, c); err != nil {
			t.Fatal(err)
		}
	}
	out = enc.End(out)
	want := strings.Replace(in, `"total_tokens":48}`, `"total_tokens":48,"cost":0.0042}`, 1)
	if d := cmp.Diff(want, string(out)); d != "" {
		t.Fatalf("relayed (-want +got):\n%s", d)
	}
	if usage == nil || usage.PromptTokens != 37 || usage.CompletionTokens != 11 {
		t.Fatalf("usage %+v", usage)
	}
	if ResponseID(completed) != "resp_67c9fdcecf488190" || !bytes.Contains(OutputOf(completed), []byte("Hi there!")) {
		t.Fatalf("completed %s", completed)
	}
	if st.Text.String() != "Hi there!" {
		t.Fatalf("text %q", st.Text.String())
	}
}

// TestNativeStreamEnds: a stream without its terminal event broke off;
// the backend's error event fails the stream and is relayed as it came.
func TestNativeStreamEnds(t *testing.T) {
	full := string(readFile(t, "testdata/native/text.sse"))
	cut := full[:strings.Index(full, "event: response.completed")]
	st := NewNativeStream(nativeResponse(cut))
	var err error
	for err == nil {
		_, err = st.Next()
	}
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("a stream cut before its end: %v", err)
	}

	withError := cut + "event: error\ndata: {\"type\":\"error\",\"sequence_number\":9,\"code\":\"server_error\",\"message\":\"boom\",\"param\":null}\n\n"
	st = NewNativeStream(nativeResponse(withError))
	for err = nil; err == nil; {
		_, err = st.Next()
	}
	e := llm.AsError(err)
	if e.Status != 502 || !strings.Contains(e.Message, "boom") {
		t.Fatalf("error event: %v", err)
	}
	relayed := (&NativeEncoder{}).Error(nil, e)
	if !bytes.Contains(relayed, []byte(`"message":"boom"`)) || !bytes.HasPrefix(relayed, []byte("event: error\n")) {
		t.Fatalf("relayed %s", relayed)
	}
	// A failure of the gateway's own (a timeout) continues the numbering.
	enc := &NativeEncoder{}
	_, _ = enc.Chunk(nil, llm.Chunk{Data: []byte(`{"type":"response.output_text.delta","sequence_number":7,"delta":"x"}`)})
	own := enc.Error(nil, &llm.Error{Code: "upstream_timeout", Message: "too slow"})
	if !bytes.Contains(own, []byte(`"sequence_number":8,"code":"upstream_timeout"`)) {
		t.Fatalf("own error %s", own)
	}
	if _, err := NewNativeStream(nativeResponse("data: {\"sequence_number\":1}\n\n")).Next(); err == nil {
		t.Fatal("an event without a type was accepted")
	}
	// A malformed event is not relayed as if it were one.
	broken := "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"brok\n\n"
	if c, err := NewNativeStream(nativeResponse(broken)).Next(); err == nil || llm.AsError(err).Kind != llm.KindUpstreamProtocol || c.Data != nil {
		t.Fatalf("a malformed event: %q %v", c.Data, err)
	}
}

// FuzzNativeStream feeds arbitrary bytes to the pass-through reader and
// encoder as a backend's Responses event stream, and to ReadNative as its
// whole answer: they end with an error or io.EOF, never panic or loop,
// and what the encoder writes is SSE events (each ending in a blank line).
func FuzzNativeStream(f *testing.F) {
	for _, name := range []string{"testdata/native/text.sse", "testdata/native/reasoning.json", "testdata/native/incomplete.json"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _, _ = ReadNative(body, "p")
		st := NewNativeStream(&http.Response{Body: io.NopCloser(bytes.NewReader(body))})
		defer st.Close()
		enc := &NativeEncoder{UsageCost: func(llm.Usage) string { return "0.1" }, Stream: st}
		var out []byte
		for i := 0; ; i++ {
			c, err := st.Next()
			if err != nil {
				break
			}
			if out, err = enc.Chunk(out[:0], c); err != nil {
				break
			}
			if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
				t.Fatalf("an event not ended by a blank line: %q", out)
			}
			if i > len(body)+10 {
				t.Fatal("more events than input bytes")
			}
		}
	})
}
