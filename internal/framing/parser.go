package framing

import (
	"bytes"
	"crypto/tls"
	"net"
	"strconv"
)

func isTLS(c net.Conn) bool {
	_, ok := c.(*tls.Conn)
	return ok
}

// state is where the parser is in the byte stream.
type state uint8

const (
	inHead      state = iota // request line and header fields, up to the blank line
	inBody                   // left bytes of a Content-Length body
	inChunkSize              // a chunk-size line
	inChunk                  // left bytes of a chunk's data
	inChunkEnd               // the line break after a chunk's data
	inTrailer                // trailer fields, up to the blank line
	off                      // not followed any more: HTTP/2, an ambiguous request, or bytes net/http refuses (it closes the connection)
)

// lineCap bounds the part of a line kept for parsing. Longer header lines
// are not framing headers (their names are checked from the part kept);
// a framing header or chunk-size line longer than that is refused by the
// parser and, the watcher gives up on the connection.
const lineCap = 256

// parser follows HTTP/1.x request framing the way net/http reads it:
// header sections, Content-Length bodies and chunked bodies with their
// trailers. It reads no further than it must to find the next request.
type parser struct {
	max int // longest header section followed
	// limit, when above 0, is the longest header section allowed: one
	// longer sets tooLarge and ends the following (the watcher answers).
	limit    int
	tooLarge bool
	target   []byte // the request target of the section being read, cut at lineCap
	st       state
	line     []byte // the current line, cut at lineCap
	long     bool   // the current line was cut
	left     int64  // bytes left in a body or chunk

	// the header section being read
	requests   int64 // request lines seen so far
	headBytes  int
	sawLine    bool // the request line of this message has been read
	http10     bool // net/http ignores Transfer-Encoding in HTTP/1.0 requests
	lengths    int  // Content-Length fields
	encodings  int  // Transfer-Encoding fields
	chunked    bool // the last Transfer-Encoding value is chunked
	badLength  bool
	contentLen int64
}

// feed takes the next bytes read from the connection and returns the
// number of the request found ambiguous in them, if any.
func (p *parser) feed(b []byte) (ambiguous int64) {
	for len(b) > 0 && p.st != off {
		switch p.st {
		case inBody, inChunk:
			n := int64(len(b))
			if n > p.left {
				n = p.left
			}
			p.left -= n
			b = b[n:]
			if p.left == 0 {
				if p.st == inBody {
					p.st = inHead
				} else {
					p.st = inChunkEnd
				}
			}
		default:
			i := bytes.IndexByte(b, '\n')
			part := b
			if i >= 0 {
				part = b[:i]
			}
			if p.st == inHead {
				p.headBytes += len(part)
				if i >= 0 {
					p.headBytes++ // the line feed
				}
				if p.limit > 0 && p.headBytes > p.limit {
					p.st, p.tooLarge = off, true
					return 0
				}
				if p.headBytes > p.max {
					p.st = off // net/http answers 431 and closes
					return 0
				}
			}
			if room := lineCap - len(p.line); len(part) > room {
				part, p.long = part[:room], true
			}
			p.line = append(p.line, part...)
			if i < 0 {
				return ambiguous
			}
			b = b[i+1:]
			line := bytes.TrimSuffix(p.line, []byte("\r"))
			if at := p.endLine(line, p.long); at > 0 {
				ambiguous = at
			}
			p.line, p.long = p.line[:0], false
		}
	}
	return ambiguous
}

// endLine acts on one complete line (without its line break); long says
// it was cut at lineCap.
func (p *parser) endLine(line []byte, long bool) (ambiguous int64) {
	switch p.st {
	case inHead:
		if !p.sawLine {
			if len(line) == 0 {
				return 0 // blank lines before a request line are skipped
			}
			p.sawLine = true
			p.requests++
			p.target = append(p.target[:0], requestTarget(line)...)
			p.http10 = bytes.HasSuffix(line, []byte(" HTTP/1.0"))
			if bytes.HasPrefix(line, []byte("PRI * HTTP/2")) {
				p.st = off // HTTP/2 with prior knowledge frames its own way
			}
			return 0
		}
		if len(line) > 0 {
			p.field(line, long)
			return 0
		}
		return p.endHead()
	case inChunkSize:
		if long {
			p.st = off
			return 0
		}
		size := line
		if i := bytes.IndexByte(size, ';'); i >= 0 {
			size = size[:i]
		}
		n, err := strconv.ParseUint(string(bytes.TrimRight(size, " \t")), 16, 63)
		switch {
		case err != nil || len(size) == 0:
			p.st = off // net/http fails the body and closes
		case n == 0:
			p.st = inTrailer
		default:
			p.st, p.left = inChunk, int64(n)
		}
	case inChunkEnd:
		if len(line) != 0 {
			p.st = off
			return 0
		}
		p.st = inChunkSize
	case inTrailer:
		if len(line) == 0 {
			p.st = inHead
		}
	}
	return 0
}

// field notes the framing headers of the section being read.
func (p *parser) field(line []byte, long bool) {
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return
	}
	name := line[:colon]
	value := bytes.TrimSpace(line[colon+1:])
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		p.lengths++
		n, err := strconv.ParseInt(string(value), 10, 64)
		if long || err != nil || n < 0 || (p.lengths > 1 && n != p.contentLen) {
			p.badLength = true
		}
		p.contentLen = n
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		p.encodings++
		p.chunked = !long && bytes.EqualFold(value, []byte("chunked"))
	}
}

// endHead decides how the body of the request just read is framed, and
// resets the header state for the next one.
func (p *parser) endHead() (ambiguous int64) {
	switch {
	case p.lengths > 0 && p.encodings > 0:
		ambiguous = p.requests
		p.st = off // the connection is closed after this request
	case p.encodings > 0 && !p.http10:
		if p.encodings == 1 && p.chunked {
			p.st = inChunkSize
		} else {
			p.st = off // net/http answers 501 and closes
		}
	case p.badLength:
		p.st = off // net/http answers 400 and closes
	case p.lengths > 0 && p.contentLen > 0:
		p.st, p.left = inBody, p.contentLen
	}
	p.headBytes, p.sawLine, p.http10, p.lengths, p.encodings, p.chunked, p.badLength, p.contentLen = 0, false, false, 0, 0, false, false, 0
	return ambiguous
}

// requestTarget is the middle word of a request line ("GET /x HTTP/1.1").
func requestTarget(line []byte) []byte {
	_, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return nil
	}
	target, _, _ := bytes.Cut(rest, []byte(" "))
	return target
}
