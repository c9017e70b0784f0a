package bedrock

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/providertest"
)

const claude = "anthropic.claude-3-5-sonnet-20240620-v1:0"

var signingTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func testAdapter() *Adapter {
	return &Adapter{
		Credentials: aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"},
		Now:         func() time.Time { return signingTime },
	}
}

func deployment() provider.Deployment {
	return provider.Deployment{Provider: "br", Type: "bedrock", Model: claude, Region: "us-east-1",
		Header: http.Header{}, Adapter: testAdapter()}
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// events encodes a .events fixture — one "event <type> <json>" or
// "exception <type> <json>" per line — as the binary event stream
// ConverseStream sends, with the SDK's encoder.
func events(t testing.TB, name string) []byte {
	t.Helper()
	var out bytes.Buffer
	enc := eventstream.NewEncoder()
	sc := bufio.NewScanner(bytes.NewReader(fixture(t, name)))
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		typ, payload, _ := strings.Cut(rest, " ")
		var h eventstream.Headers
		switch kind {
		case "event":
			h.Set(":event-type", eventstream.StringValue(typ))
		case "exception":
			h.Set(":exception-type", eventstream.StringValue(typ))
		default:
			t.Fatalf("bad fixture line %q", sc.Text())
		}
		h.Set(":content-type", eventstream.StringValue("application/json"))
		h.Set(":message-type", eventstream.StringValue(kind))
		if err := enc.Encode(&out, eventstream.Message{Headers: h, Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

var (
	jsonHeader   = http.Header{"Content-Type": {"application/json"}, "X-Amzn-Requestid": {"5f1d3d4e-9a2b-4c1e-8f00-0123456789ab"}}
	streamHeader = http.Header{"Content-Type": {"application/vnd.amazon.eventstream"}}
)

func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Suite{
		Type:       Type(),
		Settings:   provider.Settings{APIKey: "k", Region: "us-east-1"},
		Deployment: deployment(),
		Requests: []string{
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object"}}}}`,
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low"}`,
		},
		Text: providertest.Fixture{Header: jsonHeader, Body: fixture(t, "converse_text.json"), Want: providertest.Want{
			Content: "Paris is the capital of France.", Finish: "stop",
			Usage: llm.Usage{PromptTokens: 14, CompletionTokens: 8, TotalTokens: 22}}},
		TextStream: providertest.Fixture{Header: streamHeader, Body: events(t, "stream_text.events"), Want: providertest.Want{
			Content: "Paris is the capital.", Finish: "stop",
			Usage: llm.Usage{PromptTokens: 14, CompletionTokens: 5, TotalTokens: 19}}},
		Tool: providertest.Fixture{Header: jsonHeader, Body: fixture(t, "converse_tool.json"), Want: providertest.Want{
			Content:   "Let me check the weather.",
			ToolCalls: []llm.ToolCall{{ID: "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", Name: "get_weather", Arguments: `{"city":"Paris"}`}},
			Finish:    "tool_calls",
			Usage:     llm.Usage{PromptTokens: 60, CompletionTokens: 15, TotalTokens: 75, CachedTokens: 32}}},
		ToolStream: providertest.Fixture{Header: streamHeader, Body: events(t, "stream_tool.events"), Want: providertest.Want{
			Content: "Checking.",
			ToolCalls: []llm.ToolCall{
				{ID: "tooluse_5Sx0tHxKTmGMjNDJUvXI2w", Name: "get_weather", Arguments: `{"city":"Paris"}`},
				{ID: "tooluse_Q2hNvX2sQ8uSMfXJ1b2aAw", Name: "get_time", Arguments: `{"tz":"CET"}`},
			},
			Finish: "tool_calls",
			Usage:  llm.Usage{PromptTokens: 60, CompletionTokens: 15, TotalTokens: 75, CachedTokens: 32}}},
		Errors: []providertest.ErrorFixture{
			{
				Name: "throttling", Status: 429,
				Header:         http.Header{"X-Amzn-Errortype": {"ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"}, "Retry-After": {"3"}},
				Body:           []byte(`{"message":"Too many requests, please wait before trying again."}`),
				WantStatus:     429,
				WantMessage:    "Too many requests, please wait before trying again.",
				WantRetryAfter: 3 * time.Second,
			},
			{
				Name: "validation", Status: 400,
				Header:      http.Header{"X-Amzn-Errortype": {"ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"}},
				Body:        []byte(`{"message":"A conversation must start with a user message. Try again with a conversation that starts with a user message."}`),
				WantStatus:  400,
				WantMessage: "A conversation must start with a user message.",
			},
			{
				Name: "signature", Status: 403,
				Header:      http.Header{"X-Amzn-Errortype": {"InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/"}},
				Body:        []byte(`{"message":"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."}`),
				WantStatus:  403,
				WantMessage: "The request signature we calculated does not match",
			},
			{
				Name: "model_timeout", Status: 408,
				Header:      http.Header{"X-Amzn-Errortype": {"ModelTimeoutException"}},
				Body:        []byte(`{"Message":"Model has timed out in processing the request. Try your request again."}`),
				WantStatus:  408,
				WantMessage: "Model has timed out",
			},
		},
	})
}

func TestErrorCodeFromType(t *testing.T) {
	d := deployment()
	for _, c := range []struct {
		header http.Header
		body   string
		want   string
	}{
		{http.Header{"X-Amzn-Errortype": {"ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"}}, `{"message":"x"}`, "ThrottlingException"},
		{http.Header{}, `{"__type":"com.amazon.coral.validate#ValidationException","message":"x"}`, "ValidationException"},
		{http.Header{}, `{"message":"x"}`, ""},
	} {
		e := d.Adapter.Error(&http.Response{StatusCode: 400, Header: c.header, Body: io.NopCloser(strings.NewReader(c.body))}, &d)
		if e.Code != c.want || e.Message != "x" {
			t.Errorf("%v %s: code %q message %q, want %q", c.header, c.body, e.Code, e.Message, c.want)
		}
	}
}

func TestReasoning(t *testing.T) {
	d := deployment()
	req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"2+2?"}]}`, false)
	got := providertest.Complete(t, &d, req, providertest.Fixture{Header: jsonHeader, Body: fixture(t, "converse_reasoning.json")})
	want := providertest.Want{Content: "4", Reasoning: "The user asks for 2+2.", Finish: "stop",
		Usage: llm.Usage{PromptTokens: 20, CompletionTokens: 30, TotalTokens: 50}}
	providertest.Compare(t, got, want)

	req = providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"2+2?"}]}`, true)
	for _, oneByte := range []bool{false, true} {
		got = providertest.Collect(t, providertest.OpenStream(t, &d, req,
			providertest.Fixture{Header: streamHeader, Body: events(t, "stream_reasoning.events")}, oneByte))
		providertest.Compare(t, got, want)
	}
}

func TestStopReasons(t *testing.T) {
	for stop, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
		"guardrail_intervened": "content_filter", "content_filtered": "content_filter",
		"malformed_model_output": "malformed_tool_call", "malformed_tool_use": "malformed_tool_call",
		"model_context_window_exceeded": "length", "something_new": "something_new",
	} {
		if got := finishReason(stop); got != want {
			t.Errorf("finishReason(%q) = %q, want %q", stop, got, want)
		}
		d := deployment()
		body := `{"output":{"message":{"content":[{"text":"x"}],"role":"assistant"}},"stopReason":"` + stop + `","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`
		req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false)
		if got := providertest.Complete(t, &d, req, providertest.Fixture{Body: []byte(body)}); got.Finish != want {
			t.Errorf("completion with stopReason %q finished %q, want %q", stop, got.Finish, want)
		}
	}
}

func TestStreamException(t *testing.T) {
	d := deployment()
	req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true)
	s := providertest.OpenStream(t, &d, req, providertest.Fixture{Header: streamHeader, Body: events(t, "stream_throttled.events")}, true)
	defer s.Close()
	var err error
	n := 0
	for err == nil {
		_, err = s.Next()
		n++
	}
	ge := llm.AsError(err)
	if ge.Status != 429 || ge.Code != "throttlingException" || ge.Message != "Too many tokens, please wait before trying again." {
		t.Fatalf("after %d chunks: %v (%+v)", n-1, err, ge)
	}
	if n-1 != 2 {
		t.Fatalf("%d chunks before the exception, want 2 (role, text)", n-1)
	}
}

func TestStreamCutShort(t *testing.T) {
	d := deployment()
	req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true)
	full := events(t, "stream_text.events")
	for _, cut := range []int{len(full) - 200, len(full) - 3} {
		s := providertest.OpenStream(t, &d, req, providertest.Fixture{Body: full[:cut]}, false)
		var err error
		for err == nil {
			_, err = s.Next()
		}
		s.Close()
		if errors.Is(err, io.EOF) {
			t.Errorf("stream cut at %d/%d ended cleanly; want an error", cut, len(full))
		}
	}
}

// FuzzStream feeds arbitrary bytes to the event-stream decoder: it must
// end with an error or EOF, never panic or loop.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"stream_text.events", "stream_tool.events", "stream_throttled.events"} {
		f.Add(events(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := deployment()
		req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true)
		s, err := d.Adapter.Stream(&http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(b))}, &d, req)
		if err != nil {
			return
		}
		defer s.Close()
		for i := 0; i < 10000; i++ {
			if _, err := s.Next(); err != nil {
				return
			}
		}
		t.Fatal("stream did not end")
	})
}

func TestSigning(t *testing.T) {
	d := deployment()
	req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true)
	up, err := d.Adapter.ChatRequest(context.Background(), &d, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := up.URL.String(); got != "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream" {
		t.Fatalf("url %s", got)
	}
	body, _ := io.ReadAll(up.Body)
	sum := sha256.Sum256(body)
	h := up.Header
	if h.Get("X-Amz-Content-Sha256") != hex.EncodeToString(sum[:]) || h.Get("X-Amz-Date") != "20250102T030405Z" {
		t.Fatalf("signing headers %v", h)
	}
	if h.Get("Accept") != "application/vnd.amazon.eventstream" {
		t.Fatalf("accept %q", h.Get("Accept"))
	}
	auth := h.Get("Authorization")
	prefix := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250102/us-east-1/bedrock/aws4_request, SignedHeaders=accept;content-length;content-type;host;x-amz-content-sha256;x-amz-date, Signature="
	if !strings.HasPrefix(auth, prefix) || len(auth) != len(prefix)+64 {
		t.Fatalf("authorization %q", auth)
	}

	// A session token is sent and signed.
	a := testAdapter()
	a.Credentials.SessionToken = "FwoGZXIvYXdzEXAMPLE"
	d.Adapter = a
	up, _ = d.Adapter.ChatRequest(context.Background(), &d, req)
	if up.Header.Get("X-Amz-Security-Token") != "FwoGZXIvYXdzEXAMPLE" || !strings.Contains(up.Header.Get("Authorization"), ";x-amz-security-token,") {
		t.Fatalf("session token not signed: %v", up.Header)
	}

	// A Bedrock API key replaces the signature; base_url replaces the endpoint.
	d.Adapter = &Adapter{BearerToken: "bedrock-api-key-123"}
	d.BaseURL = "http://127.0.0.1:9/"
	up, _ = d.Adapter.ChatRequest(context.Background(), &d, providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false))
	if up.Header.Get("Authorization") != "Bearer bedrock-api-key-123" || up.Header.Get("X-Amz-Date") != "" {
		t.Fatalf("bearer auth headers %v", up.Header)
	}
	if up.URL.String() != "http://127.0.0.1:9/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse" {
		t.Fatalf("url %s", up.URL)
	}

	// No credentials at all is the gateway's misconfiguration, not the client's.
	d.Adapter = &Adapter{}
	if _, err := d.Adapter.ChatRequest(context.Background(), &d, req); llm.AsError(err).Status != 500 {
		t.Fatalf("no credentials: %v", err)
	}
}

func TestModelIDEscaping(t *testing.T) {
	for in, want := range map[string]string{
		"amazon.nova-lite-v1:0": "amazon.nova-lite-v1%3A0",
		"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-7-sonnet-20250219-v1:0": "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-7-sonnet-20250219-v1%3A0",
		"plain_id-1.2~x": "plain_id-1.2~x",
	} {
		if got := escapeSegment(in); got != want {
			t.Errorf("escapeSegment(%q) = %q, want %q", in, got, want)
		}
	}
}

// A model stream that broke is a 502 the router may retry on another
// deployment (Bedrock's own advice is to retry), not a 424 it gives up on.
func TestStreamErrorExceptionIsRetryable(t *testing.T) {
	err := (&eventStream{name: "br"}).exception("modelStreamErrorException", []byte(`{"message":"stream broke"}`))
	ge := llm.AsError(err)
	if ge.Kind != llm.KindUpstreamStatus || ge.Status != http.StatusBadGateway || ge.Type != "server_error" || ge.Message != "stream broke" {
		t.Fatalf("got %+v", ge)
	}
}

// A message cut by the connection (a timeout, a reset) is reported as
// that read error, for the caller to classify, not as a malformed message.
func TestStreamCutByTheConnectionIsNotMalformed(t *testing.T) {
	frames := events(t, "stream_throttled.events")
	boom := errors.New("read: connection reset by peer")
	body := &bodyReader{r: io.MultiReader(bytes.NewReader(frames[:20]), errReader{boom})}
	s := &eventStream{body: body, r: bufio.NewReader(body), dec: eventstream.NewDecoder(), name: "br", tools: map[int]int{}}
	if err := s.decode(func(*llm.ChatChunk) {}); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the read error", err)
	}
	// Bytes that arrived whole but do not frame are still malformed.
	bad := append([]byte(nil), frames...)
	bad[10] ^= 0xff // the prelude CRC
	body = &bodyReader{r: bytes.NewReader(bad)}
	s = &eventStream{body: body, r: bufio.NewReader(body), dec: eventstream.NewDecoder(), name: "br", tools: map[int]int{}}
	if ge := llm.AsError(s.decode(func(*llm.ChatChunk) {})); ge.Kind != llm.KindUpstreamProtocol {
		t.Fatalf("a bad CRC: %+v", ge)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// TestCompletionExceptionIn200: an exception's {"message":…} under a 200
// is a 502 with the provider's message, not "without output.message".
func TestCompletionExceptionIn200(t *testing.T) {
	d := deployment()
	req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false)
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"message":"The model failed."}`))}
	_, err := testAdapter().Completion(resp, &d, req)
	if e := llm.AsError(err); err == nil || e.Kind != llm.KindUpstreamStatus || e.Status != http.StatusBadGateway || e.Message != "The model failed." {
		t.Fatalf("got %v, want a 502 with the provider's message", err)
	}
}

// TestBearerTokenRedacted: in bearer-token mode, a message Bedrock (or a
// proxy before it) sent back that echoes the token reaches the client
// with the token redacted: a status error (JSON or not), an exception
// under a 200, and the exception and error messages of a stream; with
// the token from BearerToken or from the deployment's api_key.
func TestBearerTokenRedacted(t *testing.T) {
	const token = "ABSKQmVkcm9ja0FQSUtleS1zZWNyZXQ"
	viaAdapter := deployment()
	viaAdapter.Adapter = &Adapter{BearerToken: token}
	viaKey := deployment()
	viaKey.Adapter = &Adapter{}
	viaKey.APIKey = token
	echo := "Authorization: Bearer " + token + " is not valid"
	req := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, false)
	streamReq := providertest.MustRequest(t, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, true)
	frame := func(kind string, h eventstream.Headers, payload string) []byte {
		h.Set(":message-type", eventstream.StringValue(kind))
		var out bytes.Buffer
		if err := eventstream.NewEncoder().Encode(&out, eventstream.Message{Headers: h, Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	var exception, errorMsg eventstream.Headers
	exception.Set(":exception-type", eventstream.StringValue("validationException"))
	errorMsg.Set(":error-code", eventstream.StringValue("InternalFailure"))
	errorMsg.Set(":error-message", eventstream.StringValue(echo))
	for name, d := range map[string]provider.Deployment{"bearer_token": viaAdapter, "api_key": viaKey} {
		t.Run(name, func(t *testing.T) {
			var msgs []string
			for _, body := range []string{`{"message":` + `"` + echo + `"}`, echo} {
				e := d.Adapter.Error(&http.Response{StatusCode: 403, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}, &d)
				msgs = append(msgs, e.Message)
			}
			_, err := d.Adapter.(*Adapter).Completion(&http.Response{StatusCode: 200, Header: http.Header{},
				Body: io.NopCloser(strings.NewReader(`{"message":"` + echo + `"}`))}, &d, req)
			msgs = append(msgs, llm.AsError(err).Message)
			for _, f := range [][]byte{frame("exception", exception, `{"message":"`+echo+`"}`), frame("error", errorMsg, "")} {
				s := providertest.OpenStream(t, &d, streamReq, providertest.Fixture{Header: streamHeader, Body: f}, false)
				var err error
				for err == nil {
					_, err = s.Next()
				}
				s.Close()
				msgs = append(msgs, llm.AsError(err).Message)
			}
			for i, m := range msgs {
				if strings.Contains(m, token) || !strings.Contains(m, "[redacted]") {
					t.Errorf("message %d: %q; want the token redacted", i, m)
				}
			}
		})
	}
}
