package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// The keys a connection carries (auth.ConnMemo): each request gets its
// own key's answer on a connection that carries several, whichever
// server serves it.

// Two keys of one length, one byte apart, told apart by their rates.
const (
	connKeyA = "gh-connkeys-a-0001"
	connKeyB = "gh-connkeys-b-0001"
)

// oneConnClient is a client that makes every request on a single
// connection (HTTP/1.1 kept alive, or HTTP/2 with h2c), and counts its
// dials.
type oneConnClient struct {
	hc    *http.Client
	dials atomic.Int32
}

func newOneConnClient(h2c bool) *oneConnClient {
	c := &oneConnClient{}
	var d net.Dialer
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.dials.Add(1)
			return d.DialContext(ctx, network, addr)
		}}
	if h2c {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = p
	}
	c.hc = &http.Client{Transport: tr}
	return c
}

// chat sends a completion with key and returns the status and the rate
// of the key that answered (X-Ratelimit-Limit-Requests; "" on a refusal).
func (c *oneConnClient) chat(t *testing.T, base, key string, proto int) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.ProtoMajor != proto {
		t.Errorf("answered over %s, want HTTP/%d", resp.Proto, proto)
	}
	return resp.StatusCode, resp.Header.Get("X-Ratelimit-Limit-Requests")
}

// TestConnectionCarriesManyKeys: on one connection, with the gateway's
// own HTTP/1.x engine, net/http's, and HTTP/2: keys alternating get
// their own answers; a key one byte from a known one, at any position,
// is refused; a virtual key works until it is revoked and is refused
// from then on, on the connection that kept presenting it.
func TestConnectionCarriesManyKeys(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	cases := []struct {
		name, engine string
		h2c          bool
	}{
		{"h1-gatehouse", engineGatehouse, false},
		{"h1-net-http", engineNetHTTP, false},
		{"h2c", engineGatehouse, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keys := "  - {key: " + connKeyA + ", project: qa, rpm: 1001}\n  - {key: " + connKeyB + ", project: qa, rpm: 1002}\n"
			yaml := strings.Replace(baseConfig(up, c.engine+"admin_key: "+testAdminKey+"\n"), "keys:\n", "keys:\n"+keys, 1)
			gw := startGateway(t, yaml)
			proto := 1
			if c.h2c {
				proto = 2
			}
			cl := newOneConnClient(c.h2c)
			want := func(key string, status int, rate string) {
				t.Helper()
				if st, r := cl.chat(t, gw.URL, key, proto); st != status || r != rate {
					t.Fatalf("%q: %d with rate %q, want %d with rate %q", key, st, r, status, rate)
				}
			}
			for range 3 {
				want(connKeyA, 200, "1001")
				want(connKeyA, 200, "1001")
				want(connKeyB, 200, "1002")
			}
			for i := range len(connKeyA) {
				near := []byte(connKeyA)
				near[i] ^= 0x01
				want(string(near), http.StatusUnauthorized, "")
				want(connKeyA, 200, "1001")
			}

			v := adminPost(t, gw.URL, "/admin/keys", `{"project":"qa","name":"conn","rpm":1003}`)
			secret := v["key"].(string)
			want(secret, 200, "1003")
			want(secret, 200, "1003")
			adminDo(t, gw.URL, http.MethodDelete, "/admin/keys/"+v["id"].(string), "", 200)
			deadline := time.Now().Add(time.Second)
			for {
				st, _ := cl.chat(t, gw.URL, secret, proto)
				if st == http.StatusUnauthorized {
					break
				}
				if st != 200 || time.Now().After(deadline) {
					t.Fatalf("revoked key on its connection: %d, want 401 within a second", st)
				}
				time.Sleep(10 * time.Millisecond)
			}
			want(secret, http.StatusUnauthorized, "")
			want(connKeyA, 200, "1001")
			want(secret, http.StatusUnauthorized, "")

			if c.h2c { // requests of one connection at the same time
				var wg sync.WaitGroup
				for g := range 8 {
					wg.Go(func() {
						for i := range 10 {
							key, rate := connKeyA, "1001"
							if (g+i)%2 == 1 {
								key, rate = connKeyB, "1002"
							}
							if st, r := cl.chat(t, gw.URL, key, proto); st != 200 || r != rate {
								t.Errorf("%q at the same time as others: %d with rate %q, want rate %s", key, st, r, rate)
							}
						}
					})
				}
				wg.Wait()
			}
			if n := cl.dials.Load(); n != 1 {
				t.Errorf("%d connections dialled, want every request on one", n)
			}
		})
	}
}
