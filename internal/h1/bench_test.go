package h1

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
)

// BenchmarkResponse is one keep-alive request answered with a small JSON
// body and the header fields of a limited key's answer (16 in all, as
// gatehouse's), by net/http's server and by the engine, over loopback.
// The client writes prepared bytes and reads the answer by its
// Content-Length, so most of what is measured is the server.
func BenchmarkResponse(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}]}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd["Content-Type"] = []string{"application/json"}
		hd["Content-Length"] = []string{strconv.Itoa(len(body))}
		for _, k := range []string{"X-Request-Id", "X-Gatehouse-Cost", "X-Gatehouse-Provider", "X-Gatehouse-Model",
			"X-Gatehouse-Overhead-Ms", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests",
			"X-Ratelimit-Reset-Requests", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens",
			"X-Ratelimit-Reset-Tokens", "X-Gatehouse-Budget-Remaining", "X-Gatehouse-Cache", "Openai-Model"} {
			hd[k] = []string{"12345"}
		}
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	})
	std, own := servers(b, h)
	for _, s := range []struct{ name, addr string }{{"net-http", std}, {"engine", own}} {
		b.Run(s.name, func(b *testing.B) {
			c, err := net.Dial("tcp", s.addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
			br := bufio.NewReaderSize(c, 8192)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				n := -1
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if len(line) <= 2 {
						break
					}
					if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
						n, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
					}
				}
				if n != len(body) {
					b.Fatalf("content-length %d", n)
				}
				if _, err := io.CopyN(io.Discard, br, int64(n)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
