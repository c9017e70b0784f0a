package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"
)

// benchSeen is what BenchmarkRequestPath looks at in a response, from
// either client.
type benchSeen struct {
	rateLimit  bool    // an x-ratelimit-limit-requests header (warm-up requests only)
	cache      string  // x-gatehouse-cache (warm-up requests only)
	overheadMs float64 // x-gatehouse-overhead-ms (when the client was asked for it)
}

// benchDoer sends BenchmarkRequestPath's one request and fails the
// benchmark on anything but a well-formed 200. request(true) is a
// warm-up request, whose rate-limit and cache headers are reported;
// request(false) a timed one, reporting only what the timed loop needs.
type benchDoer interface {
	request(warm bool) benchSeen
	// expectCache makes the client check x-gatehouse-cache on every
	// later response, where it can do so for free ("" checks nothing).
	expectCache(v string)
}

// benchClient is the client BenchmarkRequestPath times, picked by
// BENCH_CLIENT in the environment: "raw" (or unset) for rawClient, whose
// own work is small next to the gateway's, or "go" for net/http's client,
// as the benchmark used before (scripts/bench-instructions' counts from
// before the change were taken with it). key goes in Authorization,
// header (if set) is one more request header; overhead asks for
// x-gatehouse-overhead-ms on every response.
func benchClient(b *testing.B, base, path string, body []byte, key string, header [2]string, overhead bool) benchDoer {
	b.Helper()
	switch k := os.Getenv("BENCH_CLIENT"); k {
	case "", "raw":
		hs := [][2]string{{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}}
		if header[0] != "" {
			hs = append(hs, header)
		}
		c, err := newRawClient(base, path, body, hs...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.close)
		return &rawDoer{b: b, c: c, overhead: overhead}
	case "go":
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		b.Cleanup(client.CloseIdleConnections)
		return &goDoer{b: b, client: client, url: base + path, body: body, key: key, header: header, overhead: overhead}
	default:
		b.Fatalf("BENCH_CLIENT=%q: want raw (the default) or go", k)
		return nil
	}
}

// rawDoer is benchDoer over rawClient.
type rawDoer struct {
	b        *testing.B
	c        *rawClient
	overhead bool
}

func (d *rawDoer) request(warm bool) benchSeen {
	// A timed request reads gatehouse's x- fields only if it checks one.
	resp := rawResponse{skipGatehouse: !warm && !d.overhead && d.c.cache == ""}
	if err := d.c.do(&resp); err != nil {
		d.b.Fatal(err)
	}
	var s benchSeen
	if warm {
		s.rateLimit = resp.rateLimit
		if resp.cache.n >= 0 {
			s.cache = resp.cache.String()
		}
	}
	if d.overhead {
		v := &resp.overhead
		if v.n < 0 || v.n > len(v.b) {
			d.b.Fatalf("x-gatehouse-overhead-ms %s", v.String())
		}
		ms, err := strconv.ParseFloat(string(v.b[:v.n]), 64)
		if err != nil {
			d.b.Fatalf("x-gatehouse-overhead-ms: %v", err)
		}
		s.overheadMs = ms
	}
	return s
}

func (d *rawDoer) expectCache(v string) { d.c.cache = v }

// goDoer is benchDoer over net/http's client, doing per request exactly
// what the benchmark did before rawClient (its counts stay comparable):
// it does not check x-gatehouse-cache on timed responses.
type goDoer struct {
	b        *testing.B
	client   *http.Client
	url      string
	body     []byte
	key      string
	header   [2]string
	overhead bool
}

func (d *goDoer) request(warm bool) benchSeen {
	req, _ := http.NewRequest(http.MethodPost, d.url, bytes.NewReader(d.body))
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	if d.header[0] != "" {
		req.Header.Set(d.header[0], d.header[1])
	}
	resp, err := d.client.Do(req)
	if err != nil {
		d.b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		d.b.Fatalf("status %d", resp.StatusCode)
	}
	var s benchSeen
	if warm {
		s.rateLimit = resp.Header.Get("X-Ratelimit-Limit-Requests") != ""
		s.cache = resp.Header.Get("X-Gatehouse-Cache")
	}
	if d.overhead {
		s.overheadMs, _ = strconv.ParseFloat(resp.Header.Get("X-Gatehouse-Overhead-Ms"), 64)
	}
	return s
}

func (d *goDoer) expectCache(string) {}
