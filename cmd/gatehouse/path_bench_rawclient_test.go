package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// rawClient is BenchmarkRequestPath's HTTP/1.1 client: keep-alive
// connections over net.Conn, one request written as bytes prepared once,
// and each response read off one bufio.Reader without building a header
// map. It exists because scripts/bench-instructions counts every thread
// of the process, the client's too, and net/http's client spends a large
// share of a request on work that is not the gateway's: canonical header
// keys and a map of every header (16,700 instructions a request for the
// full stack's six x-ratelimit headers alone). The requests it writes
// are byte for byte what net/http's client writes for the same request
// (the same headers in the same order), so the server side does the same
// work either way. It is not a general client: one request, 200s
// expected, no redirects, no compression, no HTTP/1.0.
type rawClient struct {
	addr string // host:port
	req  []byte // the whole request: head and body

	// cache, if set, is the x-gatehouse-cache value every response must
	// carry (compared case-insensitively).
	cache string

	mu      sync.Mutex
	idle    []*rawKeepAlive
	open    []*rawKeepAlive // every connection not closed yet, for close
	dialled int             // connections dialled, for tests
}

// rawKeepAlive is one keep-alive connection and the reader that owns its
// input: a response is read off it whole before the next request is
// written, so nothing is left buffered between requests.
type rawKeepAlive struct {
	c net.Conn
	r *bufio.Reader
}

// newRawClient prepares the request POST path with body to base
// ("http://host:port") and the headers, in the order net/http writes
// them: Host, User-Agent, Content-Length, the caller's headers sorted by
// name (pass them sorted, canonical case), Accept-Encoding.
func newRawClient(base, path string, body []byte, headers ...[2]string) (*rawClient, error) {
	addr, ok := strings.CutPrefix(base, "http://")
	if !ok || addr == "" || strings.ContainsAny(addr, "/?#") {
		return nil, fmt.Errorf("raw client: base %q is not http://host:port", base)
	}
	var sb strings.Builder
	sb.WriteString("POST " + path + " HTTP/1.1\r\n")
	sb.WriteString("Host: " + addr + "\r\n")
	sb.WriteString("User-Agent: Go-http-client/1.1\r\n")
	sb.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	for i, h := range headers {
		if i > 0 && headers[i-1][0] >= h[0] {
			return nil, fmt.Errorf("raw client: header %q out of order (net/http sorts them)", h[0])
		}
		sb.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	sb.WriteString("Accept-Encoding: gzip\r\n\r\n")
	sb.Write(body)
	return &rawClient{addr: addr, req: []byte(sb.String())}, nil
}

// errNoResponse is a connection that ended before the first byte of a
// response: a kept-alive connection the server closed while it was idle,
// which a client retries on a new one (net/http's does too).
var errNoResponse = errors.New("connection closed before a response")

// do sends the request once and reads the response into resp. Any
// response that is not a well-formed 200 (with the x-gatehouse-cache
// value c.cache, when set) is an error.
func (c *rawClient) do(resp *rawResponse) error {
	for attempt := 0; ; attempt++ {
		rc, reused, err := c.get()
		if err != nil {
			return err
		}
		err = c.roundTrip(rc, resp)
		if err != nil {
			c.drop(rc)
			if reused && attempt == 0 && errors.Is(err, errNoResponse) {
				continue
			}
			return err
		}
		if resp.close {
			c.drop(rc)
		} else {
			c.put(rc)
		}
		return c.check(resp)
	}
}

func (c *rawClient) roundTrip(rc *rawKeepAlive, resp *rawResponse) error {
	if _, err := rc.c.Write(c.req); err != nil {
		return fmt.Errorf("raw client: write: %w", errors.Join(errNoResponse, err))
	}
	return readResponse(rc.r, resp)
}

// check is what every response must be, once read.
func (c *rawClient) check(resp *rawResponse) error {
	if resp.status != 200 {
		return fmt.Errorf("raw client: status %d: %q", resp.status, string(resp.bodyHead()))
	}
	if resp.bodyLen == 0 {
		return errors.New("raw client: a 200 with an empty body")
	}
	if c.cache != "" && !resp.cache.equalFold(c.cache) {
		return fmt.Errorf("raw client: x-gatehouse-cache %q, want %q", resp.cache.String(), c.cache)
	}
	return nil
}

// get takes an idle connection, or dials one; reused says which.
func (c *rawClient) get() (rc *rawKeepAlive, reused bool, err error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		rc = c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return rc, true, nil
	}
	c.mu.Unlock()
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		return nil, false, fmt.Errorf("raw client: %w", err)
	}
	rc = &rawKeepAlive{c: conn, r: bufio.NewReaderSize(conn, rawReadBuffer)}
	c.mu.Lock()
	c.open = append(c.open, rc)
	c.dialled++
	c.mu.Unlock()
	return rc, false, nil
}

// drop closes a connection that is not to be used again.
func (c *rawClient) drop(rc *rawKeepAlive) {
	rc.c.Close()
	c.mu.Lock()
	if i := slices.Index(c.open, rc); i >= 0 {
		c.open = slices.Delete(c.open, i, i+1)
	}
	c.mu.Unlock()
}

func (c *rawClient) put(rc *rawKeepAlive) {
	c.mu.Lock()
	c.idle = append(c.idle, rc)
	c.mu.Unlock()
}

// close closes every connection the client opened.
func (c *rawClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rc := range c.open {
		rc.c.Close()
	}
	c.open, c.idle = nil, nil
}

// rawReadBuffer bounds a response's status line, each header line and
// each chunk-size line (a longer one is refused); bodies stream through
// it.
const rawReadBuffer = 8 << 10

// rawResponse is what readResponse keeps of a response: only what the
// benchmark checks. Header values are copied out of the reader's buffer
// (the next read overwrites it) into fixed arrays, so reading a response
// allocates nothing.
type rawResponse struct {
	status    int
	close     bool // Connection: close
	rateLimit bool // an x-ratelimit-limit-requests header was there
	cache     shortValue
	overhead  shortValue // x-gatehouse-overhead-ms
	bodyLen   int64      // body bytes read (chunked: the chunks' data)

	head  [128]byte // a non-200's first body bytes, for the error
	headN int

	// skipGatehouse, set by the caller before a read and kept by it,
	// leaves gatehouse's x- fields unread (rateLimit, cache and
	// overhead stay unset): a timed request that checks none of them
	// then spends nothing on the x- lines but finding their ends.
	skipGatehouse bool
}

func (r *rawResponse) bodyHead() []byte { return r.head[:r.headN] }

// shortValue is a header value of up to len(b) bytes, copied; n is its
// whole length (more than len(b): too long to keep; -1: absent).
type shortValue struct {
	b [32]byte
	n int
}

func (v *shortValue) set(val []byte) {
	v.n = len(val)
	copy(v.b[:], val)
}

// equalFold says whether the value is s, ASCII case-insensitively.
func (v *shortValue) equalFold(s string) bool {
	return v.n >= 0 && v.n <= len(v.b) && len(s) == v.n && asciiEqualFold(v.b[:v.n], s)
}

func (v *shortValue) String() string {
	switch {
	case v.n < 0:
		return "(absent)"
	case v.n > len(v.b):
		return string(v.b[:]) + "…"
	}
	return string(v.b[:v.n])
}

// asciiEqualFold compares b with lower, which is lower case, ignoring
// the case of b's ASCII letters, without allocating.
func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// errMalformed wraps every framing error, so tests can tell a refused
// response from a failed read.
var errMalformed = errors.New("malformed response")

func malformed(format string, args ...any) error {
	return fmt.Errorf("raw client: %w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// readResponse reads one HTTP/1.1 response off r into resp, the body to
// its end (Content-Length, or chunked with its trailers), and leaves r at
// the next response's first byte. Lines must end in CRLF. A response
// with both Content-Length and chunked framing, with neither, with
// another transfer coding, a folded header line or a status line that is
// not HTTP/1.1 is refused: none is what the gateway, the plain proxy or
// the mock send, so any of them is a bug to see.
func readResponse(r *bufio.Reader, resp *rawResponse) error {
	*resp = rawResponse{cache: shortValue{n: -1}, overhead: shortValue{n: -1}, skipGatehouse: resp.skipGatehouse}
	if _, err := r.Peek(1); err != nil {
		return fmt.Errorf("raw client: %w", errors.Join(errNoResponse, err))
	}
	line, err := readLine(r)
	if err != nil {
		return err
	}
	// HTTP/1.1 SP 3DIGIT [SP reason]
	const proto = "HTTP/1.1 "
	if len(line) < len(proto) || string(line[:len(proto)]) != proto {
		return malformed("status line %q", line)
	}
	rest := line[len(proto):]
	if len(rest) < 3 || (len(rest) > 3 && rest[3] != ' ') {
		return malformed("status line %q", line)
	}
	for i := range 3 {
		if rest[i] < '0' || rest[i] > '9' {
			return malformed("status line %q", line)
		}
		resp.status = resp.status*10 + int(rest[i]-'0')
	}
	if resp.status < 100 {
		return malformed("status line %q", line)
	}
	if resp.status < 200 {
		return malformed("informational status %d (not expected here)", resp.status)
	}

	length := int64(-1)
	chunked := false
	if err := resp.readFields(r, &length, &chunked); err != nil {
		return err
	}
	switch {
	case chunked && length >= 0:
		return malformed("both content-length and chunked")
	case chunked:
		return readChunked(r, resp)
	case length >= 0:
		return readBody(r, resp, length)
	}
	return malformed("neither content-length nor chunked (a body to the connection's end)")
}

// readFields reads the header lines up to the empty one. The lines
// already in r's buffer are cut there (one IndexByte a line) and let go
// with one Discard; only a line that is not whole in the buffer yet goes
// through readLine, which reads more. A response's head is one read in
// the benchmark, so a line costs the client little more than finding its
// end.
func (resp *rawResponse) readFields(r *bufio.Reader, length *int64, chunked *bool) error {
	for {
		buf, _ := r.Peek(r.Buffered())
		used := 0
		for {
			nl := bytes.IndexByte(buf[used:], '\n')
			if nl < 0 {
				break
			}
			line := buf[used : used+nl+1]
			used += nl + 1
			if len(line) < 2 || line[len(line)-2] != '\r' {
				return malformed("line %q does not end in CRLF", line)
			}
			line = line[:len(line)-2]
			if len(line) == 0 {
				_, _ = r.Discard(used) // buffered: cannot fail
				return nil
			}
			if !resp.takes(line[0]) {
				continue
			}
			if err := resp.fieldLine(line, length, chunked); err != nil {
				return err
			}
		}
		_, _ = r.Discard(used)
		line, err := readLine(r)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		if err := resp.fieldLine(line, length, chunked); err != nil {
			return err
		}
	}
}

// takes says whether a header line that starts with first is one for
// fieldLine: a field the client may read, or a line to refuse. The loop
// over the buffered lines asks it first, so a line it passes by costs no
// call.
func (resp *rawResponse) takes(first byte) bool {
	switch first | 0x20 {
	case 'c', 't':
		return true
	case 'x':
		return !resp.skipGatehouse
	}
	return first == ' ' || first == '\t' || first == ':'
}

// fieldLine takes in one header line, CRLF cut off. Its first letter
// says whether it can be a field the client reads: the framing fields
// (Content-Length, Connection, Transfer-Encoding) are parsed and checked
// whole, colon and all; gatehouse's own x- fields are matched by where a
// colon would end the name (one byte compared per name), so the x-
// lines a gateway adds cost the client a look at their first byte and at
// two or three others, not a search for their colon (the client's work is
// in every count, and must not grow with the gateway's headers more than
// finding their ends does). Every other line is checked only for what
// breaks framing: a folded line or a missing name.
func (resp *rawResponse) fieldLine(line []byte, length *int64, chunked *bool) error {
	switch line[0] | 0x20 {
	case 'c', 't':
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || line[colon-1] == ' ' || line[colon-1] == '\t' {
			return malformed("header line %q", line)
		}
		return resp.framingField(line[:colon], trimOWS(line[colon+1:]), length, chunked)
	case 'x':
		if !resp.skipGatehouse {
			resp.gatehouseField(line)
		}
		return nil
	}
	if line[0] == ' ' || line[0] == '\t' || line[0] == ':' {
		return malformed("header line %q", line)
	}
	return nil
}

// framingField takes in a field that starts with c or t, which may be
// one that frames the body or closes the connection.
func (resp *rawResponse) framingField(name, val []byte, length *int64, chunked *bool) error {
	switch len(name) {
	case len("content-length"):
		if nameIs(name, "content-length") {
			n, ok := parseLength(val)
			if !ok || (*length >= 0 && n != *length) {
				return malformed("content-length %q", val)
			}
			*length = n
		}
	case len("transfer-encoding"):
		if nameIs(name, "transfer-encoding") {
			if *chunked || !asciiEqualFold(val, "chunked") {
				return malformed("transfer-encoding %q (only chunked, once)", val)
			}
			*chunked = true
		}
	case len("connection"):
		if nameIs(name, "connection") {
			resp.close = resp.close || hasToken(val, "close")
		}
	}
	return nil
}

// gatehouseField takes in a line that starts with x, which may be one of
// the three gatehouse fields the benchmark checks: a name is compared
// only when a colon ends the line's name where it would end that one.
func (resp *rawResponse) gatehouseField(line []byte) {
	const cache, overhead, rateLimit = "x-gatehouse-cache", "x-gatehouse-overhead-ms", "x-ratelimit-limit-requests"
	switch {
	case colonAt(line, len(cache)) && nameIs(line[:len(cache)], cache):
		resp.cache.set(trimOWS(line[len(cache)+1:]))
	case colonAt(line, len(overhead)) && nameIs(line[:len(overhead)], overhead):
		resp.overhead.set(trimOWS(line[len(overhead)+1:]))
	case colonAt(line, len(rateLimit)) && nameIs(line[:len(rateLimit)], rateLimit):
		resp.rateLimit = true
	}
}

// colonAt says whether line has a colon at i.
func colonAt(line []byte, i int) bool { return i < len(line) && line[i] == ':' }

// nameIs says whether a field name is lower, a lower-case name of
// letters and '-', ignoring case, comparing eight bytes at a time: OR-ing
// 0x20 into a byte maps an upper-case letter to its lower case and leaves
// lower-case letters and '-' as they are, so only those bytes (and a
// carriage return, 0x0d, where lower has '-', which a name cannot hold
// when the server sends valid fields) meet lower's bytes. The gateway's
// own names are 17 to 32 bytes long, and a byte at a time is most of
// what the client would spend on them.
func nameIs(name []byte, lower string) bool {
	if len(name) != len(lower) {
		return false
	}
	const fold = 0x2020202020202020
	i := 0
	for ; i+8 <= len(name); i += 8 {
		if binary.LittleEndian.Uint64(name[i:])|fold != binary.LittleEndian.Uint64([]byte(lower[i:i+8])) {
			return false
		}
	}
	for ; i < len(name); i++ {
		if name[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// readLine reads one CRLF-terminated line and returns it without the
// CRLF; it aliases r's buffer until the next read.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case err == nil: // the common case first: errors.Is is a call a line
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, malformed("a line longer than %d bytes", r.Size())
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("raw client: %w: cut off after %q", io.ErrUnexpectedEOF, line)
	default:
		return nil, fmt.Errorf("raw client: %w", err)
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, malformed("line %q does not end in CRLF", line)
	}
	return line[:len(line)-2], nil
}

// readBody reads n bytes of body.
func readBody(r *bufio.Reader, resp *rawResponse, n int64) error {
	if resp.status != 200 && resp.headN < len(resp.head) {
		// Keep the first bytes of an error body for the message.
		k, _ := r.Peek(int(min(n, int64(len(resp.head)-resp.headN))))
		resp.headN += copy(resp.head[resp.headN:], k)
	}
	for n > 0 {
		step := int(min(n, int64(r.Size())))
		d, err := r.Discard(step)
		resp.bodyLen += int64(d)
		n -= int64(d)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("raw client: body %d bytes short: %w", n, err)
		}
	}
	return nil
}

// readChunked reads a chunked body: chunks (size in hex, extensions
// ignored), the last chunk, then trailer lines up to the empty line.
func readChunked(r *bufio.Reader, resp *rawResponse) error {
	for {
		line, err := readLine(r)
		if err != nil {
			return err
		}
		size, ok := parseChunkSize(line)
		if !ok {
			return malformed("chunk size line %q", line)
		}
		if size == 0 {
			break
		}
		if err := readBody(r, resp, size); err != nil {
			return err
		}
		end, err := readLine(r)
		if err != nil {
			return err
		}
		if len(end) != 0 {
			return malformed("chunk data longer than its size %d", size)
		}
	}
	for { // trailers
		line, err := readLine(r)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
	}
}

// parseChunkSize reads "HEX[;ext...]" (whitespace allowed before the
// semicolon).
func parseChunkSize(line []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			goto end
		}
		if i >= 15 { // more than 15 hex digits could overflow
			return 0, false
		}
		n = n<<4 | int64(d)
	}
end:
	if i == 0 {
		return 0, false
	}
	rest := trimOWS(line[i:])
	if len(rest) > 0 && rest[0] != ';' {
		return 0, false
	}
	return n, true
}

// parseLength reads a Content-Length: decimal digits only.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// hasToken says whether the comma-separated list v holds tok (lower
// case), ASCII case-insensitively.
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		i := 0
		for i < len(v) && v[i] != ',' {
			i++
		}
		if asciiEqualFold(trimOWS(v[:i]), tok) {
			return true
		}
		if i == len(v) {
			break
		}
		v = v[i+1:]
	}
	return false
}

// trimOWS trims HTTP's optional whitespace (spaces and tabs).
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
