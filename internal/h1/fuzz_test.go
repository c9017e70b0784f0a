package h1

import (
	"net"
	"net/http"
	"testing"
)

// FuzzDifferential sends generated request bytes to net/http's server and
// to the engine (the client's write side closed after them) and wants the
// same answers: the same responses, or both refusing alike.
func FuzzDifferential(f *testing.F) {
	for _, tc := range diffCases {
		if len(tc.raw) < 4096 {
			f.Add([]byte(tc.raw))
		}
	}
	std, own := servers(f, http.HandlerFunc(testHandler))
	f.Fuzz(func(t *testing.T, raw []byte) {
		want := parse(raw, halfClosed(t, std, raw))
		got := parse(raw, halfClosed(t, own, raw))
		if d := diffParsed(want, got); d != "" {
			t.Errorf("engine and net/http differ on %q:\n%s", raw, d)
		}
	})
}

// halfClosed is exchange with the client's side closed after raw, so a
// request cut short ends too.
func halfClosed(t *testing.T, addr string, raw []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(raw); err != nil {
		return nil
	}
	_ = c.(*net.TCPConn).CloseWrite()
	return exchangeRest(t, c, raw)
}
