package framing

import (
	"strconv"
	"strings"
	"testing"
)

// smuggled is a request whose length is ambiguous, as a smuggling attempt
// sends it: a proxy framing it by Content-Length would see a second
// request in the chunked body's end.
const smuggled = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin/keys HTTP/1.1\r\nHost: x\r\n\r\n"

func TestParserFindsTheAmbiguousRequest(t *testing.T) {
	// Bodies that look like requests must be skipped as bodies.
	fake := "GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
	tests := []struct {
		name   string
		stream string
		want   int64
	}{
		{"plain gets", "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n", 0},
		{"first", smuggled, 1},
		{"after a length body", "POST / HTTP/1.1\r\nContent-Length: " + itoa(len(fake)) + "\r\n\r\n" + fake + smuggled, 2},
		{"after a chunked body with trailers", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" +
			hex(len(fake)) + ";ext=1\r\n" + fake + "\r\n3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n" + "GET / HTTP/1.1\r\n\r\n" + smuggled, 3},
		{"case and spaces", "post / HTTP/1.1\r\ncontent-length:  3 \r\nTRANSFER-ENCODING: Chunked\r\n\r\n", 1},
		{"bare line feeds and a leading blank line", "\r\nGET / HTTP/1.1\nHost: x\n\nPOST / HTTP/1.1\nContent-Length: 0\nTransfer-Encoding: chunked\n\n", 2},
		{"http/1.0 frames by length", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggled, 2},
		{"http/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + smuggled, 0},
		{"header section over the limit", "GET / HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 9000) + "\r\n\r\n" + smuggled, 0},
		{"a long line that is not a framing header", "GET / HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 3000) + "\r\n\r\n" + smuggled, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// At once, then byte by byte: the answer must not depend on
			// how reads split the stream.
			for _, step := range []int{len(tt.stream), 1, 7} {
				p := parser{max: headerCap(4096)}
				var got int64
				for s := tt.stream; len(s) > 0; {
					n := min(step, len(s))
					if at := p.feed([]byte(s[:n])); at > 0 {
						got = at
					}
					s = s[n:]
				}
				if got != tt.want {
					t.Errorf("read %d bytes at a time: ambiguous request %d, want %d", step, got, tt.want)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
func hex(n int) string  { return strconv.FormatInt(int64(n), 16) }

// With a limit, the parser flags the first header section over it and
// knows its request target, however reads split the stream; sections up
// to the limit pass.
func TestParserFlagsHeadersOverTheLimit(t *testing.T) {
	ok := "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
	big := func(target string, pad int) string {
		return "POST " + target + " HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("p", pad) + "\r\n\r\n"
	}
	tests := []struct {
		name, stream string
		tooLarge     bool
		target       string
	}{
		{"under the limit", big("/v1/messages", 4000), false, ""},
		{"over it", big("/v1/messages?beta=1", 5000), true, "/v1/messages?beta=1"},
		{"over it after a request within it", ok + big("/v1/chat/completions", 5000), true, "/v1/chat/completions"},
		{"a request line over it", "GET /" + strings.Repeat("a", 5000) + " HTTP/1.1\r\n\r\n", true, ""},
	}
	for _, tt := range tests {
		for _, step := range []int{len(tt.stream), 1, 13} {
			p := parser{max: headerCap(4096), limit: 4096}
			for s := tt.stream; len(s) > 0 && !p.tooLarge; {
				n := min(step, len(s))
				p.feed([]byte(s[:n]))
				s = s[n:]
			}
			if p.tooLarge != tt.tooLarge || (tt.tooLarge && string(p.target) != tt.target) {
				t.Errorf("%s, reads of %d: tooLarge %v target %q; want %v %q", tt.name, step, p.tooLarge, p.target, tt.tooLarge, tt.target)
			}
		}
	}
}
