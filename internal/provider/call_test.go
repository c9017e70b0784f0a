package provider

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/llm"
)

func TestCallFirstByteTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	call := StartCall(context.Background(), Timeouts{FirstByte: 50 * time.Millisecond})
	defer call.Stop()
	req, _ := http.NewRequestWithContext(call.Context(), http.MethodGet, up.URL, nil)
	_, err := (&http.Client{Transport: NewTransport()}).Do(req)
	if err == nil {
		t.Fatal("request succeeded, want a timeout")
	}
	ge := call.Err("up", err)
	if ge.Status != http.StatusGatewayTimeout || ge.Kind != llm.KindUpstreamTimeout {
		t.Fatalf("got %d %s (%v), want 504 upstream_timeout", ge.Status, ge.Kind, ge)
	}
}

func TestCallIdleTimeoutMidStream(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("data: one\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer up.Close()
	call := StartCall(context.Background(), Timeouts{FirstByte: time.Second, Idle: 80 * time.Millisecond})
	defer call.Stop()
	req, _ := http.NewRequestWithContext(call.Context(), http.MethodGet, up.URL, nil)
	resp, err := (&http.Client{Transport: NewTransport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	call.Progress()
	defer resp.Body.Close()
	start := time.Now()
	_, err = io.ReadAll(resp.Body)
	if err == nil {
		t.Fatal("stalled body read returned no error")
	}
	if time.Since(start) > 2*time.Second {
		t.Fatalf("idle timeout took %v", time.Since(start))
	}
	ge := call.Err("up", err)
	if ge.Status != http.StatusGatewayTimeout || !errors.Is(context.Cause(call.Context()), ErrIdleTimeout) {
		t.Fatalf("got %v, want idle timeout", ge)
	}
}

func TestCallClientCancelIsNotATimeout(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	call := StartCall(parent, Timeouts{FirstByte: time.Second})
	defer call.Stop()
	cancel()
	ge := call.Err("up", context.Canceled)
	if ge.Kind != llm.KindCanceled {
		t.Fatalf("got kind %s, want canceled", ge.Kind)
	}
}

func TestConnectRefusedIs502(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	call := StartCall(context.Background(), Timeouts{Connect: time.Second})
	defer call.Stop()
	req, _ := http.NewRequestWithContext(call.Context(), http.MethodGet, "http://"+addr, nil)
	_, err := (&http.Client{Transport: NewTransport()}).Do(req)
	ge := call.Err("up", err)
	if ge.Status != http.StatusBadGateway || ge.Kind != llm.KindUpstreamConnect {
		t.Fatalf("got %d %s, want 502 upstream_connect", ge.Status, ge.Kind)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(10 * time.Second).Format(http.TimeFormat)}}, 10 * time.Second},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{}, 0},
	}
	for _, c := range cases {
		if got := RetryAfter(c.h, now); got != c.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", c.h, got, c.want)
		}
	}
}

func TestStatusErrorShapes(t *testing.T) {
	cases := []struct {
		body     string
		wantMsg  string
		wantCode string
		wantType string
	}{
		{`{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "Rate limit reached", "rate_limit_exceeded", "requests"},
		{`{"error":"model overloaded"}`, "model overloaded", "", ""},
		{`{"message":"bad thing"}`, "bad thing", "", ""},
		{`{"detail":"Not Found"}`, "Not Found", "", ""},
		{`{"error":{"message":"x","code":400}}`, "x", "400", ""},
		{`<html>oops</html>`, `provider "p" answered 503: <html>oops</html>`, "", ""},
	}
	for _, c := range cases {
		resp := &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {"2"}}}
		e := StatusError("p", resp, []byte(c.body))
		if e.Message != c.wantMsg || e.Code != c.wantCode || e.Type != c.wantType {
			t.Errorf("%s: got message=%q code=%q type=%q", c.body, e.Message, e.Code, e.Type)
		}
		if e.Status != 503 || e.RetryAfter != 2*time.Second {
			t.Errorf("%s: status %d retry %v", c.body, e.Status, e.RetryAfter)
		}
	}
}

// TestTransportErrorTLS: every way a handshake with the provider fails
// is an upstream_tls 502 saying why in words safe to show, not a
// protocol error; what is not a handshake failure is not one.
func TestTransportErrorTLS(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	quiet := log.New(io.Discard, "", 0)
	untrusted := httptest.NewUnstartedServer(ok)
	untrusted.Config.ErrorLog = quiet
	untrusted.StartTLS()
	defer untrusted.Close()
	clientCert := httptest.NewUnstartedServer(ok)
	clientCert.Config.ErrorLog = quiet
	clientCert.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert, MaxVersion: tls.VersionTLS12}
	clientCert.StartTLS()
	defer clientCert.Close()
	plain := httptest.NewServer(ok)
	defer plain.Close()

	trusting := NewTransport()
	trusting.TLSClientConfig = &tls.Config{RootCAs: x509.NewCertPool()}
	trusting.TLSClientConfig.RootCAs.AddCert(untrusted.Certificate())
	trusting.TLSClientConfig.RootCAs.AddCert(clientCert.Certificate())
	for _, tc := range []struct {
		name, url string
		transport *http.Transport
		kind      llm.ErrorKind
		says      string
	}{
		{"untrusted certificate", untrusted.URL, NewTransport(), llm.KindUpstreamTLS, "not trusted"},
		{"certificate for another name", strings.Replace(untrusted.URL, "127.0.0.1", "localhost", 1), trusting, llm.KindUpstreamTLS, "not trusted"},
		{"plain HTTP behind https", "https://" + strings.TrimPrefix(plain.URL, "http://"), NewTransport(), llm.KindUpstreamTLS, "does not speak TLS"},
		{"handshake refused", clientCert.URL, trusting, llm.KindUpstreamTLS, "refused the TLS handshake"},
		{"trusted", untrusted.URL, trusting, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tc.url, nil)
			resp, err := (&http.Client{Transport: tc.transport}).Do(req)
			if tc.kind == "" {
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if why := tlsFailure(err); why != "" {
					t.Errorf("a working connection reads as a TLS failure: %q", why)
				}
				return
			}
			if err == nil {
				resp.Body.Close()
				t.Fatal("the request went through")
			}
			e := TransportError("p", err)
			if e.Kind != tc.kind || e.Status != http.StatusBadGateway || e.Code != "upstream_tls_error" || !strings.Contains(e.Message, tc.says) {
				t.Errorf("%v: got kind %q status %d code %q message %q; want %q saying %q", err, e.Kind, e.Status, e.Code, e.Message, tc.kind, tc.says)
			}
			if strings.Contains(e.Message, "x509") || strings.Contains(e.Message, "127.0.0.1") {
				t.Errorf("the message shows the certificate's details: %q", e.Message)
			}
		})
	}
	refused := TransportError("p", &net.OpError{Op: "dial", Err: errors.New("connection refused")})
	if refused.Kind != llm.KindUpstreamConnect {
		t.Errorf("a refused connect: %q", refused.Kind)
	}
	reset := TransportError("p", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")})
	if reset.Kind != llm.KindUpstreamProtocol {
		t.Errorf("a reset mid-answer: %q", reset.Kind)
	}
}

// TestCallIdleDeadlineCountsFromLastEvent: events only note their time,
// and the idle timer, when it fires, sets itself again for what is left
// since the last event, so the deadline is the last event's time plus
// Idle. The clock is the test's; the timer's firing is called directly.
func TestCallIdleDeadlineCountsFromLastEvent(t *testing.T) {
	for _, firstByte := range []time.Duration{0, time.Hour} {
		call := StartCall(context.Background(), Timeouts{FirstByte: firstByte, Idle: time.Minute})
		// The clock is read by the call's own timer too: a deadline
		// moved to 1 ns away fires at once on the timer's goroutine.
		var clock atomic.Int64
		call.clock = func() time.Duration { return time.Duration(clock.Load()) }
		at := func(d time.Duration) { clock.Store(int64(d)) }
		call.Progress() // the response's headers, at 0
		at(40 * time.Second)
		call.Progress() // an event at 40 s
		at(time.Minute) // the timer set at 0 fires: 20 s since the last event
		call.gapExpired()
		if err := context.Cause(call.Context()); err != nil {
			t.Fatalf("first byte %v: cancelled %v 20 s after the last event, want the deadline at 100 s", firstByte, err)
		}
		at(100*time.Second - 1)
		call.gapExpired()
		if err := context.Cause(call.Context()); err != nil {
			t.Fatalf("first byte %v: cancelled %v just before the deadline", firstByte, err)
		}
		at(100 * time.Second)
		call.gapExpired()
		if err := context.Cause(call.Context()); err != ErrIdleTimeout {
			t.Fatalf("first byte %v: cause %v at the deadline, want %v", firstByte, err, ErrIdleTimeout)
		}
		call.Stop()
	}
}
