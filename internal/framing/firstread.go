package framing

import (
	"io"
	"sync"
)

// A server that speaks HTTP/2 over cleartext (http.Protocols'
// UnencryptedHTTP2) first peeks at a new connection for the 24-byte
// HTTP/2 preface, and lets that peek read no more than 14 bytes from the
// socket ("PRI * HTTP/2.0"). An HTTP/1.1 request is then read with a
// second read. Both run under the one read-header deadline that net/http
// sets when the connection starts, and a socket read whose deadline has
// passed fails at once, even with the request's bytes already waiting in
// the kernel. When the deadline passes between the two reads (a burst of
// thousands of connections on a busy machine does that), net/http parses
// the 14 bytes it has as the whole request line and answers "400 Bad
// Request" to a request the client sent complete and in time; a server
// without cleartext HTTP/2 reads the same request whole in its first
// read. So the first read of a connection, when it asks for fewer bytes
// than the preface, reads what the socket has into a buffer of its own
// and hands the rest out to the next reads.
//
// The buffer comes from a pool and goes back as soon as its bytes are
// handed out. So that a burst of connections whose clients have not
// written yet does not hold a buffer each while they wait, the first read
// waits for the socket to be readable before it takes one (where the
// connection offers its file descriptor's poller: a TCP connection does).

// prefaceLen is the length of the HTTP/2 client connection preface: a
// first read asking for less is the cleartext HTTP/2 peek.
const prefaceLen = 24

// aheadSize is how much the first read takes from the socket: as much as
// net/http's own reader would, enough for a request's whole header
// section in the common case.
const aheadSize = 4096

// aheadPool holds the first-read buffers: a connection keeps one only
// until its bytes are handed out, which is usually the very next read.
var aheadPool = sync.Pool{New: func() any { return new([aheadSize]byte) }}

// firstRead is the state of a connection's read-ahead. Reads of a
// connection are not concurrent (net/http reads one at a time), so it
// needs no lock.
type firstRead struct {
	begun bool
	buf   *[aheadSize]byte // nil once handed back to the pool
	rest  []byte           // bytes read ahead and not yet handed out
	err   error            // the error of the read ahead, for after rest
}

// read serves b from the bytes read ahead, or, on the connection's first
// read, reads ahead when b is shorter than the preface; ok is false when
// it did neither and the caller reads the socket itself.
func (f *firstRead) read(b []byte, socket io.Reader) (n int, err error, ok bool) {
	if f.buf == nil {
		if f.begun || len(b) >= prefaceLen {
			f.begun = true
			return 0, nil, false
		}
		f.begun = true
		if err := awaitReadable(socket); err != nil {
			return 0, err, true
		}
		f.buf = aheadPool.Get().(*[aheadSize]byte)
		got, rerr := socket.Read(f.buf[:])
		f.rest, f.err = f.buf[:got], rerr
	}
	n = copy(b, f.rest)
	f.rest = f.rest[n:]
	if len(f.rest) == 0 {
		err = f.err
		f.release()
	}
	return n, err, true
}

func (f *firstRead) release() {
	aheadPool.Put(f.buf)
	f.buf, f.rest, f.err = nil, nil, nil
}
