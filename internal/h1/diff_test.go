package h1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testHandler does, by path, each thing a handler does that the engine
// must frame as net/http frames it; its answers say what it saw of the
// request.
func testHandler(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	switch r.URL.Path {
	case "/echo":
		b, err := io.ReadAll(r.Body)
		h.Set("Content-Type", "text/plain")
		h.Set("X-Body-Len", strconv.Itoa(len(b)))
		fmt.Fprintf(w, "%s %s %s host=%q remote=%t len=%d err=%v body=%q te=%v x=%q",
			r.Method, r.RequestURI, r.Proto, r.Host, r.RemoteAddr != "", r.ContentLength, err, b, r.TransferEncoding, r.Header.Values("X-Test"))
	case "/unread":
		h.Set("Content-Type", "text/plain")
		io.WriteString(w, "did not read the body")
	case "/big":
		h.Set("Content-Type", "text/plain")
		for i := range 300 {
			fmt.Fprintf(w, "line %04d of a body longer than the held buffer\n", i)
		}
	case "/sniff":
		io.WriteString(w, "<html><body>sniffed</body></html>")
	case "/length":
		h.Set("Content-Length", "5")
		io.WriteString(w, "12345")
	case "/trailer":
		h.Set("Trailer", "X-Cost")
		h.Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, "data: 2\n\n")
		h.Set("X-Cost", "0.25")
		h.Set(http.TrailerPrefix+"X-Late", "yes")
	case "/flush":
		h.Set("Content-Type", "text/plain")
		io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		io.WriteString(w, "second")
	case "/nocontent":
		h.Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNoContent)
		_, err := io.WriteString(w, "dropped")
		if !errors.Is(err, http.ErrBodyNotAllowed) {
			panic("a 204 took a body")
		}
	case "/notmodified":
		h.Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotModified)
	case "/close":
		h.Set("Connection", "close")
		h.Set("Content-Type", "text/plain")
		io.WriteString(w, "closing")
	case "/status":
		h.Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "teapot")
	case "/after":
		// Changes after WriteHeader do not go out.
		h.Set("X-Before", "1")
		w.WriteHeader(http.StatusCreated)
		h.Set("X-After", "1")
		io.WriteString(w, "created")
	case "/dirty":
		h["X-Dirty"] = []string{"a\r\nInjected: yes", "tab\tkept"}
		io.WriteString(w, "dirty")
	case "/empty":
	default:
		http.NotFound(w, r)
	}
}

// servers starts net/http's server and the engine with the same handler
// and limits; it returns their addresses.
func servers(t testing.TB, handler http.Handler) (std, own string) {
	t.Helper()
	l1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	hs := &http.Server{Handler: handler, MaxHeaderBytes: 4096, Protocols: p, DisableGeneralOptionsHandler: true,
		ErrorLog: quietLog()}
	es := &Server{Handler: handler, MaxHeaderBytes: 4096, ErrorLog: quietLog()}
	go func() { _ = hs.Serve(l1) }()
	go func() { _ = es.Serve(l2) }()
	t.Cleanup(func() {
		_ = hs.Close()
		_ = es.Close()
	})
	return l1.Addr().String(), l2.Addr().String()
}

// exchange sends raw to addr and returns all the server wrote until it
// closed the connection. The deadline only keeps a broken server from
// hanging the test; no case comes near it.
func exchange(t testing.TB, addr string, raw []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = c.Write(raw) }()
	return exchangeRest(t, c, raw)
}

// exchangeRest reads what the server answers on c until it closes.
func exchangeRest(t testing.TB, c net.Conn, raw []byte) []byte {
	t.Helper()
	addr := c.RemoteAddr().String()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	out, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: no end to the answer to %.200q; got %.500q", addr, raw, out)
	}
	return out
}

// parsed is what a client sees of one response.
type parsed struct {
	Status, Proto         string
	Header, Trailer       string
	ContentLength         int64
	TransferEncoding      []string
	Close                 bool
	Body                  string
	BodyErr               string
	Uncomplete, Malformed string
}

// parse reads the responses in out, one per request in raw (HEAD
// responses have no body) while they parse.
func parse(raw, out []byte) []parsed {
	var methods []string
	rr := bufio.NewReader(bytes.NewReader(raw))
	for {
		req, err := http.ReadRequest(rr)
		if err != nil {
			break
		}
		methods = append(methods, req.Method)
		_, _ = io.Copy(io.Discard, req.Body)
	}
	var got []parsed
	br := bufio.NewReader(bytes.NewReader(out))
	for i := 0; ; i++ {
		if _, err := br.Peek(1); err != nil {
			return got
		}
		req := &http.Request{Method: "GET"}
		if i < len(methods) {
			req.Method = methods[i]
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			rest, _ := io.ReadAll(br)
			return append(got, parsed{Malformed: err.Error() + ": " + string(rest)})
		}
		if resp.StatusCode == http.StatusContinue {
			i--
		}
		b, err := io.ReadAll(resp.Body)
		p := parsed{Status: resp.Status, Proto: resp.Proto, Header: fields(resp.Header), ContentLength: resp.ContentLength,
			TransferEncoding: resp.TransferEncoding, Close: resp.Close, Body: string(b), Trailer: fields(resp.Trailer)}
		if err != nil {
			p.BodyErr = err.Error()
		}
		got = append(got, p)
	}
}

// fields is h as sorted lines, without Date (its second may differ).
func fields(h http.Header) string {
	var lines []string
	for k, vv := range h {
		if k == "Date" {
			continue
		}
		for _, v := range vv {
			lines = append(lines, k+": "+v)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

const closeReq = "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

var diffCases = []struct{ name, raw string }{
	{"keep-alive then close", "GET /echo HTTP/1.1\r\nHost: example.com\r\nX-Test: a\r\n\r\n" + closeReq},
	{"pipelined pair", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /echo?q=1 HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"connection close", closeReq + "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"},
	{"HTTP/1.0", "GET /echo HTTP/1.0\r\n\r\n"},
	{"HTTP/1.0 keep-alive", "GET /length HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /echo HTTP/1.0\r\n\r\n"},
	{"HTTP/1.0 keep-alive, no length", "GET /flush HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"},
	{"HEAD", "HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\nHEAD /big HTTP/1.1\r\nHost: x\r\n\r\nHEAD /empty HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"100-continue read", "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nbody" + closeReq},
	{"100-continue unread", "POST /unread HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\nbody" + closeReq},
	{"unknown expectation", "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 4\r\n\r\nbody"},
	{"chunked body", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n" + closeReq},
	{"chunked body unread", "POST /unread HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" + closeReq},
	{"unread body drained", "POST /unread HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world" + closeReq},
	{"unread body too long", "POST /unread HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n" + strings.Repeat("a", 300000) + closeReq},
	{"bad chunked body", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"},
	{"both lengths", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" + closeReq},
	{"two content lengths", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"},
	{"unsupported transfer encoding", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"},
	{"bad request line", "GET\r\n\r\n"},
	{"bad version", "GET / HTTP/3.0\r\nHost: x\r\n\r\n"},
	{"no host", "GET /echo HTTP/1.1\r\n\r\n"},
	{"two hosts", "GET /echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"},
	{"bad host", "GET /echo HTTP/1.1\r\nHost: a b\r\n\r\n"},
	{"bad header name", "GET /echo HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n"},
	{"bad header value", "GET /echo HTTP/1.1\r\nHost: x\r\nX-Test: a\x01b\r\n\r\n"},
	{"oversized header", "GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 9000) + "\r\n\r\n"},
	{"big body chunked", "GET /big HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"big body HTTP/1.0", "GET /big HTTP/1.0\r\n\r\n"},
	{"sniffed type", "GET /sniff HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"handler length", "GET /length HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"trailers", "GET /trailer HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"flush", "GET /flush HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"no content", "GET /nocontent HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"not modified", "GET /notmodified HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"handler closes", "GET /close HTTP/1.1\r\nHost: x\r\n\r\nGET /echo HTTP/1.1\r\nHost: x\r\n\r\n"},
	{"other status", "GET /status HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"header after WriteHeader", "GET /after HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"control bytes in a value", "GET /dirty HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"empty answer", "GET /empty HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"options star", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n" + closeReq},
	{"stray CRLF after POST", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi\r\n" + closeReq},
	{"absolute target", "GET http://example.com/echo?a=b HTTP/1.1\r\nHost: example.com\r\n\r\n" + closeReq},
	{"lone LF line ends", "GET /echo HTTP/1.1\nHost: x\nConnection: close\n\n"},
}

// TestDifferential sends each case's bytes to net/http's server and to
// the engine, both serving testHandler, and wants the same responses
// (Date aside).
func TestDifferential(t *testing.T) {
	std, own := servers(t, http.HandlerFunc(testHandler))
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(tc.raw)
			want := parse(raw, exchange(t, std, raw))
			got := parse(raw, exchange(t, own, raw))
			if len(want) == 0 {
				t.Fatal("net/http answered nothing: the case tests nothing")
			}
			if d := diffParsed(want, got); d != "" {
				t.Errorf("engine and net/http differ:\n%s", d)
			}
		})
	}
}

func diffParsed(want, got []parsed) string {
	var b strings.Builder
	if len(want) != len(got) {
		fmt.Fprintf(&b, "%d responses from net/http, %d from the engine\n", len(want), len(got))
	}
	for i := range min(len(want), len(got)) {
		if fmt.Sprintf("%+v", want[i]) != fmt.Sprintf("%+v", got[i]) {
			fmt.Fprintf(&b, "response %d:\n net/http: %+v\n engine:   %+v\n", i, want[i], got[i])
		}
	}
	if len(want) != len(got) {
		fmt.Fprintf(&b, "net/http: %+v\nengine:   %+v\n", want, got)
	}
	return b.String()
}
