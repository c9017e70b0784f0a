package llm

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Event is one server-sent event. Data is the event's data lines joined by
// "\n"; it is only valid until the next call to Reader.Next.
type Event struct {
	Name string // the "event:" field; empty means "message"
	ID   string
	Data []byte
}

// maxEventSize bounds one event so a broken upstream cannot make the
// gateway buffer without limit.
const maxEventSize = 8 << 20

// ErrEventTooLarge is returned for an event over maxEventSize.
var ErrEventTooLarge = errors.New("sse: event too large")

// Reader decodes a text/event-stream as the WHATWG spec defines it: lines
// end in \n, \r\n or \r; "data:" lines accumulate; a blank line dispatches;
// lines starting with ':' are comments. It never reads ahead past the
// event it returns, so an event is handed on the moment its blank line
// arrives.
type Reader struct {
	br      *bufio.Reader
	max     int // largest event or line accepted: maxEventSize
	line    []byte
	data    []byte
	name    string
	id      string
	skipLF  bool // the previous line ended in \r: a following \n belongs to it
	hasData bool
	started bool // the first line, which may begin with a BOM, has been read
}

// bom is the UTF-8 byte order mark the spec strips from the stream's start.
var bom = []byte("\xef\xbb\xbf")

// readBufferSize is the Reader's own buffer. It is small because a
// stream keeps it for its whole life and spends that life waiting: the
// upstream connection already buffers what the socket delivered (the
// HTTP transport's 4 KiB), so this one only needs to hold about an event
// to find its line ends; longer lines are assembled in Reader.line.
// At 4 KiB it was the largest buffer an open stream held of its own.
const readBufferSize = 512

// NewReader returns a Reader reading from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, readBufferSize), max: maxEventSize} // longer lines are assembled in r.line
}

// Next returns the next event. At the end of input it returns io.EOF (an
// event not terminated by a blank line is dropped, as the spec says).
func (r *Reader) Next() (Event, error) {
	r.data = r.data[:0]
	r.name, r.id, r.hasData = "", "", false
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && len(line) == 0 {
				return Event{}, io.EOF
			}
			if err != io.EOF {
				return Event{}, err
			}
			// A final line without terminator, then EOF: no dispatch.
			return Event{}, io.EOF
		}
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, bom)
		}
		if len(line) == 0 {
			if !r.hasData {
				r.name, r.id = "", ""
				continue
			}
			return Event{Name: r.name, ID: r.id, Data: r.data}, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if r.hasData {
				r.data = append(r.data, '\n')
			}
			if len(r.data)+len(value) > r.max {
				return Event{}, ErrEventTooLarge
			}
			r.data = append(r.data, value...)
			r.hasData = true
		case "event":
			r.name = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				r.id = string(value)
			}
		}
	}
}

// HasEvent reports whether a whole event is already buffered, so the next
// call to Next will not wait for the network. A relay uses it to write
// back-to-back events with one flush: nothing is held back, since the
// following event is already here.
func (r *Reader) HasEvent() bool {
	n := r.br.Buffered()
	if n == 0 {
		return false
	}
	b, _ := r.br.Peek(n)
	// A dispatch needs a data line and a blank line after it; blank lines
	// alone (keep-alives) dispatch nothing and must not count.
	i := bytes.Index(b, []byte("data"))
	if i < 0 {
		return false
	}
	return hasBlankLine(b[i:])
}

// hasBlankLine reports whether b holds "\n\n", "\r\n\r\n" or "\r\r": a
// line ended, then an empty one. It visits only the line ends, found
// with IndexByte, and looks around each: the relay asks this after every
// chunk, and three substring searches read the buffer three times.
func hasBlankLine(b []byte) bool {
	for p := 0; ; p++ {
		i := bytes.IndexByte(b[p:], '\n')
		if i < 0 {
			break
		}
		p += i
		if p+1 < len(b) && b[p+1] == '\n' ||
			p > 0 && b[p-1] == '\r' && p+2 < len(b) && b[p+1] == '\r' && b[p+2] == '\n' {
			return true
		}
	}
	for p := 0; ; p++ {
		i := bytes.IndexByte(b[p:], '\r')
		if i < 0 {
			return false
		}
		p += i
		if p+1 < len(b) && b[p+1] == '\r' {
			return true
		}
	}
}

// readLine returns the next line without its terminator.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	if r.skipLF {
		r.skipLF = false
		b, err := r.br.Peek(1)
		if err != nil {
			return nil, err
		}
		if b[0] == '\n' {
			_, _ = r.br.Discard(1)
		}
	}
	for {
		if r.br.Buffered() == 0 {
			if _, err := r.br.Peek(1); err != nil {
				return r.line, err
			}
		}
		buf, _ := r.br.Peek(r.br.Buffered())
		if i := lineEnd(buf); i >= 0 {
			// Checked here too, so the limit does not depend on how the
			// line was split across reads.
			if len(r.line)+i > r.max {
				return nil, ErrEventTooLarge
			}
			r.skipLF = buf[i] == '\r'
			_, _ = r.br.Discard(i + 1)
			if len(r.line) == 0 {
				// The whole line is in the buffer: handed out where it
				// lies, not copied. Discard moved no bytes, and none
				// move before the next readLine, by which time Next has
				// copied what it keeps of this line.
				return buf[:i], nil
			}
			r.line = append(r.line, buf[:i]...)
			return r.line, nil
		}
		if len(r.line)+len(buf) > r.max {
			return nil, ErrEventTooLarge
		}
		r.line = append(r.line, buf...)
		_, _ = r.br.Discard(len(buf))
	}
}

// AppendEvent appends data as one SSE event ("data: …\n\n"). Data holding
// newlines is split into several data lines so it round-trips.
func AppendEvent(b []byte, name string, data []byte) []byte {
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	for {
		i := bytes.IndexByte(data, '\n')
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, data...)
			break
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		data = data[i+1:]
	}
	return append(b, '\n', '\n')
}

// lineEnd is the index of the first '\r' or '\n' in b, or -1. It is two
// IndexByte searches, the '\r' only up to the '\n', instead of
// bytes.IndexAny, which for a set of two bytes tests the line a byte at
// a time: every line of every stream passes through here.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	end := i
	if end < 0 {
		end = len(b)
	}
	if j := bytes.IndexByte(b[:end], '\r'); j >= 0 {
		return j
	}
	return i
}
