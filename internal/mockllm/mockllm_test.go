package mockllm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func start(t *testing.T, o Options) (*Server, *httptest.Server) {
	t.Helper()
	s := New(o)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// chatJSON builds a chat request with one user message.
func chatJSON(model, user string, stream, includeUsage bool) string {
	req := map[string]any{"model": model, "messages": []map[string]any{
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": user},
	}}
	if stream {
		req["stream"] = true
	}
	if includeUsage {
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	b, _ := json.Marshal(req)
	return string(b)
}

func newRequest(t *testing.T, ctx context.Context, method, url, body string, hdr map[string]string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// do sends a request and reads the whole answer.
func do(t *testing.T, ts *httptest.Server, method, path, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	resp, err := ts.Client().Do(newRequest(t, context.Background(), method, ts.URL+path, body, hdr))
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

// events splits an SSE body into its data payloads, failing on anything
// that is not exactly "data: …\n\n".
func events(t *testing.T, body []byte) []string {
	t.Helper()
	s := string(body)
	if !strings.HasSuffix(s, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", s)
	}
	var out []string
	for ev := range strings.SplitSeq(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		out = append(out, data)
	}
	return out
}

type apiErrorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, b []byte) apiErrorBody {
	t.Helper()
	var e apiErrorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body (%v): %s", err, b)
	}
	var raw map[string]map[string]any
	_ = json.Unmarshal(b, &raw)
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := raw["error"][k]; !ok {
			t.Errorf("error body lacks %q: %s", k, b)
		}
	}
	return e
}

func deref(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

var unstable = regexp.MustCompile(`"id":"chatcmpl-[A-Za-z0-9]{29}"|"created":\d+`)

// golden compares got, with ids and timestamps masked, to testdata/name.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	got = unstable.ReplaceAllFunc(got, func(m []byte) []byte {
		if bytes.HasPrefix(m, []byte(`"id"`)) {
			return []byte(`"id":"chatcmpl-ID"`)
		}
		return []byte(`"created":0`)
	})
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden:\ngot:  %s\nwant: %s", name, got, want)
	}
}

func TestAPIKey(t *testing.T) {
	_, ts := start(t, Options{APIKey: "sk-test-0123456789abcdef"})
	body := chatJSON("gpt-4o-mini", "hi", false, false)
	tests := []struct {
		name   string
		auth   string
		status int
		code   string
	}{
		{"missing", "", 401, "<null>"},
		{"wrong", "Bearer sk-wrong-key-999999999", 401, "invalid_api_key"},
		{"not bearer", "sk-test-0123456789abcdef", 401, "invalid_api_key"},
		{"right", "Bearer sk-test-0123456789abcdef", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.auth != "" {
				hdr["Authorization"] = tt.auth
			}
			resp, b := do(t, ts, "POST", "/v1/chat/completions", body, hdr)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if tt.status == 200 {
				return
			}
			e := decodeError(t, b)
			if got := deref(e.Error.Code); got != tt.code || e.Error.Type != "invalid_request_error" {
				t.Errorf("type %q code %q, want invalid_request_error %q", e.Error.Type, got, tt.code)
			}
			if strings.Contains(e.Error.Message, "sk-wrong-key-999999999") {
				t.Errorf("the rejected key is echoed in full: %s", e.Error.Message)
			}
		})
	}
	// The control endpoints stay open: scripts inspect the mock without
	// knowing its key.
	if resp, b := do(t, ts, "GET", "/mock/stats", "", nil); resp.StatusCode != 200 {
		t.Errorf("/mock/stats: %d %s", resp.StatusCode, b)
	}
}

func TestRoutes(t *testing.T) {
	_, ts := start(t, Options{Models: []string{"m-one", "org/m-two"}})
	tests := []struct {
		method, path string
		status       int
		want         string
	}{
		{"GET", "/v1/models", 200, `{"object":"list","data":[{"id":"m-one","object":"model","created":1715367049,"owned_by":"system"},{"id":"org/m-two","object":"model","created":1715367049,"owned_by":"system"}]}`},
		{"GET", "/v1/models/org/m-two", 200, `{"id":"org/m-two","object":"model","created":1715367049,"owned_by":"system"}`},
		{"GET", "/v1/models/gpt-9", 404, `{"error":{"message":"The model 'gpt-9' does not exist or you do not have access to it.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
		{"GET", "/v1/chat/completions", 404, `{"error":{"message":"Invalid URL (GET /v1/chat/completions)","type":"invalid_request_error","param":null,"code":null}}`},
		{"POST", "/chat/completions", 404, `{"error":{"message":"Invalid URL (POST /chat/completions)","type":"invalid_request_error","param":null,"code":null}}`},
		{"POST", "/v1/completions", 404, `{"error":{"message":"Invalid URL (POST /v1/completions)","type":"invalid_request_error","param":null,"code":null}}`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			resp, b := do(t, ts, tt.method, tt.path, "", nil)
			if resp.StatusCode != tt.status || string(b) != tt.want {
				t.Errorf("got %d %s\nwant %d %s", resp.StatusCode, b, tt.status, tt.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

func TestStatsAndRecording(t *testing.T) {
	s, ts := start(t, Options{RecordLimit: 3})
	for i := range 5 {
		hdr := map[string]string{"X-Trace": string(rune('a' + i))}
		do(t, ts, "POST", "/v1/chat/completions", chatJSON("m"+string(rune('0'+i)), "hi", i%2 == 0, false), hdr)
	}
	do(t, ts, "POST", "/v1/chat/completions", `{"model":`, nil)
	do(t, ts, "GET", "/v1/nothing", "", nil)

	want := Stats{Requests: 7, Completed: 5, Errors: 2}
	if got := s.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	recs := s.Requests()
	if len(recs) != 3 {
		t.Fatalf("kept %d requests, want RecordLimit 3", len(recs))
	}
	if r := recs[0]; r.Method != "POST" || r.Path != "/v1/chat/completions" || r.Header.Get("X-Trace") != "e" ||
		!strings.Contains(string(r.Body), `"model":"m4"`) || r.Received.IsZero() {
		t.Errorf("oldest kept record = %+v, want the fifth chat request", r)
	}
	if recs[1].Path != "/v1/chat/completions" || string(recs[1].Body) != `{"model":` || recs[2].Path != "/v1/nothing" {
		t.Errorf("records out of order: %q %q", recs[1].Body, recs[2].Path)
	}

	// The same over HTTP, for scripts in another process.
	_, b := do(t, ts, "GET", "/mock/stats", "", nil)
	var st Stats
	if err := json.Unmarshal(b, &st); err != nil || st != want {
		t.Errorf("/mock/stats = %s (%v), want %+v", b, err, want)
	}
	_, b = do(t, ts, "GET", "/mock/requests", "", nil)
	var got []Recorded
	if err := json.Unmarshal(b, &got); err != nil || len(got) != 3 || string(got[1].Body) != `{"model":` {
		t.Errorf("/mock/requests = %s (%v)", b, err)
	}
	if !strings.Contains(string(b), `"body":"{\"model\":"`) {
		t.Errorf("/mock/requests should show bodies as text: %s", b)
	}

	if resp, _ := do(t, ts, "POST", "/mock/reset", "", nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("/mock/reset: %d", resp.StatusCode)
	}
	if got := s.Stats(); got != (Stats{}) || len(s.Requests()) != 0 {
		t.Errorf("after reset: %+v, %d records", got, len(s.Requests()))
	}
}

func TestRecordingDisabled(t *testing.T) {
	s, ts := start(t, Options{RecordLimit: -1})
	do(t, ts, "POST", "/v1/chat/completions", chatJSON("m", "hi", false, false), nil)
	if n := len(s.Requests()); n != 0 || s.Stats().Completed != 1 {
		t.Errorf("records %d, stats %+v", n, s.Stats())
	}
}

// readEvents reads SSE events from r into ch until r fails, then closes ch
// after sending the error (nil for a clean EOF) on errc.
func readEvents(r io.Reader, ch chan<- string, errc chan<- error) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			errc <- err
			close(ch)
			return
		}
		if data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: "); ok {
			ch <- data
		}
	}
}

func waitCancellation(t *testing.T, s *Server) Cancellation {
	t.Helper()
	select {
	case c := <-s.Cancelled():
		if c.Observed.Before(c.Received) {
			t.Errorf("cancellation observed (%v) before the request was received (%v)", c.Observed, c.Received)
		}
		return c
	case <-time.After(30 * time.Second): // the request would hang forever otherwise
		t.Fatal("no cancellation observed")
	}
	return Cancellation{}
}
