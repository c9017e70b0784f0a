package server

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/asynclog"
)

// TestQueuedRequestLine: through a request log that lends its buffers
// (asynclog.Writer, a lineQueue) the request lines are byte for byte
// those written through a plain writer, line after line in reused
// buffers, and a level the logger disables is written by neither.
func TestQueuedRequestLine(t *testing.T) {
	bodies := []string{
		`{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, // 404: INFO, error fields
		`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`, // panics: 500, WARN
		`{"model":"gone \"quoted\"","messages":[]}`,
	}
	lines := func(queued bool, level slog.Level) []string {
		s, _ := newTestServer(t)
		var out bytes.Buffer
		var w io.Writer = &out
		var q *asynclog.Writer
		if queued {
			q = asynclog.New(&out, 64)
			w = q
		}
		s.log = slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
		s.SetRequestLog(w)
		if (s.lineQueue != nil) != queued {
			t.Fatalf("queued %v: the server's lineQueue is %v", queued, s.lineQueue)
		}
		fixed := time.Date(2026, 11, 29, 9, 0, 0, 5, time.UTC)
		s.now = func() time.Time { return fixed }
		for range 3 {
			for _, body := range bodies {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
				s.Handler().ServeHTTP(httptest.NewRecorder(), req)
			}
		}
		if q != nil {
			_ = q.Close()
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if strings.Contains(l, `"msg":"request"`) {
				var m struct {
					RequestID string `json:"request_id"`
				}
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("queued %v: line %s: %v", queued, l, err)
				}
				got = append(got, strings.ReplaceAll(l, m.RequestID, "ID")) // random: one placeholder in both
			}
		}
		return got
	}
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelWarn} {
		plain, queued := lines(false, level), lines(true, level)
		want := 3 * len(bodies)
		if level == slog.LevelWarn {
			want = 3 // the panics' lines only
		}
		if len(plain) != want || len(queued) != want {
			t.Fatalf("level %v: %d lines plain, %d queued; want %d each", level, len(plain), len(queued), want)
		}
		for i := range plain {
			if queued[i] != plain[i] {
				t.Errorf("level %v, line %d:\n queued %s\n plain  %s", level, i, queued[i], plain[i])
			}
		}
	}
}
