package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"gatehouse/internal/auth"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/openai"
	"gatehouse/internal/route"
)

// TestContentLengthOnTheWire: every whole JSON answer reaches the client
// with its Content-Length, over HTTP/1.1 and HTTP/2, whether writeJSON
// set it (a body over autoContentLength) or left it to net/http (one at
// or under it), at the sizes either side of both servers' buffers.
func TestContentLengthOnTheWire(t *testing.T) {
	// The upstream answers with a completion of the size its deployment
	// asks for in X-Size.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.Header.Get("X-Size"))
		head := `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`
		tail := `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, head+strings.Repeat("a", max(n-len(head)-len(tail), 0))+tail)
	}))
	t.Cleanup(up.Close)
	sizes := []int{300, 2000, 2048, 2049, 4000, 4096, 4097, 20000} // about 2048 (HTTP/1) and 4096 (HTTP/2)
	pool := route.NewPool(route.PoolOptions{})
	var groups []*route.Group
	for _, n := range sizes {
		d := &provider.Deployment{Provider: "up", Type: "openai", Model: "m-" + strconv.Itoa(n), BaseURL: up.URL + "/v1", Adapter: openai.Adapter{},
			Client: http.DefaultClient, Header: http.Header{"X-Size": {strconv.Itoa(n)}}}
		groups = append(groups, pool.Group(route.Spec{Name: "size-" + strconv.Itoa(n), Strategy: route.Failover,
			Targets: []*provider.Deployment{d}}))
	}
	table := route.NewTable(groups)
	const key = "gh-length"
	rt := &Runtime{Routes: table, MaxBodyBytes: 1 << 20, ModelList: ModelList(table),
		Auth: auth.NewStatic([]auth.StaticKey{{Secret: key, Principal: auth.Principal{KeyID: "k", Project: "p"}}})}
	h := New(rt, slog.New(slog.NewTextHandler(io.Discard, nil))).Handler()

	for _, h2 := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(h)
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		t.Cleanup(srv.Close)
		wantProto := map[bool]int{false: 1, true: 2}[h2]
		for _, n := range sizes {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
				strings.NewReader(`{"model":"size-`+strconv.Itoa(n)+`","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || resp.ProtoMajor != wantProto {
				t.Fatalf("%d bytes: %s %d %v %.200s", n, resp.Proto, resp.StatusCode, err, body)
			}
			if resp.ContentLength != int64(len(body)) || resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) ||
				len(resp.TransferEncoding) != 0 {
				t.Errorf("%s, %d-byte body: Content-Length %q (ContentLength %d), Transfer-Encoding %q",
					resp.Proto, len(body), resp.Header.Get("Content-Length"), resp.ContentLength, resp.TransferEncoding)
			}
		}
	}
}
