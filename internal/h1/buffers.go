package h1

import (
	"bufio"
	"io"
	"sync"
)

// What a connection buffers is taken from pools when it is needed and,
// while a handler streams, given back between its flushes: a stream
// that writes an event now and then holds no write buffer and no body
// buffer while it waits for the next one, so 1,000 open streams hold
// what the few writing at any moment need, not 6 KiB each.
var (
	readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
	writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}
	bodyPool   = sync.Pool{New: func() any { return new([bodyBufferSize]byte) }}
	fieldPool  = sync.Pool{New: func() any { b := make([]byte, 0, fieldBufferSize); return &b }}
)

// lazyWriter is the connection's write buffer: a pooled bufio.Writer
// taken at the first write, kept across responses, and given back by
// release once it holds nothing.
type lazyWriter struct {
	under io.Writer     // the connection (connWriter)
	bw    *bufio.Writer // nil while none is held
}

// take is the slow path of Write and WriteString: the common write
// checks one pointer and calls bufio directly.
func (l *lazyWriter) take() {
	l.bw = writerPool.Get().(*bufio.Writer)
	l.bw.Reset(l.under)
}

// buffer is the held bufio.Writer, taken first if none is held: for
// the header block's writer, which gathers lines in its free space.
func (l *lazyWriter) buffer() *bufio.Writer {
	if l.bw == nil {
		l.take()
	}
	return l.bw
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if l.bw == nil {
		l.take()
	}
	return l.bw.Write(p)
}

func (l *lazyWriter) WriteString(s string) (int, error) {
	if l.bw == nil {
		l.take()
	}
	return l.bw.WriteString(s)
}

// Flush sends what is held; with nothing held there is nothing to send.
func (l *lazyWriter) Flush() error {
	if l.bw == nil {
		return nil
	}
	return l.bw.Flush()
}

// release gives the buffer back to the pool if it holds nothing (a
// failed flush leaves bytes in it: it is then kept until the connection
// closes).
func (l *lazyWriter) release() {
	if l.bw != nil && l.bw.Buffered() == 0 {
		l.drop()
	}
}

// drop gives the buffer back to the pool, with whatever it still holds
// (the connection is closing).
func (l *lazyWriter) drop() {
	if l.bw != nil {
		l.bw.Reset(nil)
		writerPool.Put(l.bw)
		l.bw = nil
	}
}

// holdBody gives a response the connection's body buffer, taking one
// from the pool if the connection has none.
func (c *conn) holdBody() []byte {
	if c.body == nil {
		c.body = bodyPool.Get().(*[bodyBufferSize]byte)
	}
	return c.body[:0]
}

// releaseFields gives the connection's field buffer (FieldWriter) back
// to the pool: the header block that carried its lines is written.
func (c *conn) releaseFields() {
	if c.fieldBuf != nil {
		fieldPool.Put(c.fieldBuf)
		c.fieldBuf = nil
	}
}

// releaseBody gives the connection's body buffer back to the pool; the
// response holding it must hold nothing in it.
func (c *conn) releaseBody() {
	if c.body != nil {
		bodyPool.Put(c.body)
		c.body = nil
	}
}
