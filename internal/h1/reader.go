package h1

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connReader is the reader under a connection's bufio.Reader. It bounds
// the header section's bytes, and while a handler runs with nothing left
// to read of its request, it keeps one read of the socket pending in the
// background: the client hanging up ends that read, which cancels the
// request's context (a stream stops its upstream call then). A byte that
// read gets (the next request, pipelined) is kept for the next Read.
type connReader struct {
	c *conn

	mu      sync.Mutex
	cond    sync.Cond // signalled when the background read ends; L is &mu
	inRead  bool      // a background read is pending
	aborted bool      // abortPendingRead ended it on purpose
	hasByte bool
	byteBuf [1]byte
	remain  int64 // bytes the header section may still take; < 0: no bound

	cancel context.CancelFunc // the running request's, for a client that goes away
}

func (r *connReader) setReadLimit(n int64) { r.remain = n }

func (r *connReader) hitReadLimit() bool { return r.remain == 0 }

func (r *connReader) busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inRead
}

func (r *connReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	if r.inRead {
		r.mu.Unlock()
		panic("h1: read while a background read is pending")
	}
	if r.remain == 0 {
		r.mu.Unlock()
		return 0, io.EOF
	}
	if len(p) == 0 {
		r.mu.Unlock()
		return 0, nil
	}
	if r.remain > 0 && int64(len(p)) > r.remain {
		p = p[:r.remain]
	}
	if r.hasByte {
		p[0] = r.byteBuf[0]
		r.hasByte = false
		if r.remain > 0 {
			r.remain--
		}
		r.mu.Unlock()
		return 1, nil
	}
	r.mu.Unlock()
	n, err := r.c.nc.Read(p)
	if r.remain > 0 {
		r.remain -= int64(n)
	}
	if err != nil {
		r.cancelRequest()
	}
	return n, err
}

// setCancel names the context a hang-up cancels: the running request's.
func (r *connReader) setCancel(cancel context.CancelFunc) {
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
}

func (r *connReader) cancelRequest() {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// startBackgroundRead begins the pending read, once the handler has no
// more of its request to read.
func (r *connReader) startBackgroundRead() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inRead {
		panic("h1: second background read")
	}
	if r.hasByte {
		return // the next request's first byte is in: nothing to watch
	}
	r.inRead = true
	_ = r.c.nc.SetReadDeadline(time.Time{})
	go r.backgroundRead()
}

func (r *connReader) backgroundRead() {
	n, err := r.c.nc.Read(r.byteBuf[:])
	r.mu.Lock()
	if n == 1 {
		r.hasByte = true
	}
	var ne net.Error
	if errors.As(err, &ne) && r.aborted && ne.Timeout() {
		// The deadline abortPendingRead set: not the client's doing.
	} else if err != nil && r.cancel != nil {
		r.cancel()
	}
	r.aborted = false
	r.inRead = false
	r.mu.Unlock()
	r.cond.Broadcast()
}

// abortPendingRead ends the background read, if any, and waits for it.
func (r *connReader) abortPendingRead() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.inRead {
		return
	}
	r.aborted = true
	_ = r.c.nc.SetReadDeadline(time.Unix(1, 0)) // a deadline in the past ends the pending read at once
	for r.inRead {
		r.cond.Wait()
	}
	_ = r.c.nc.SetReadDeadline(time.Time{})
}

// body is a request's body as the handler sees it: the first read sends
// 100 Continue when the client asked for it, the end starts the
// background read, and Close does not drain (the server drains a bounded
// amount itself after the handler).
type body struct {
	io.ReadCloser // from http.ReadRequest
	w             *response
	remain        int64       // of a Content-Length body; -1: unknown
	expect        bool        // the client sent Expect: 100-continue
	continueDue   atomic.Bool // 100 Continue not sent yet, and wanted; cleared under the response's continueMu
	sawEOF        bool
	closed        bool
	err           error // the read error that ended the body, if not EOF
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.sawEOF {
		return 0, io.EOF
	}
	if b.continueDue.Load() {
		b.w.writeContinue()
	}
	n, err := b.ReadCloser.Read(p)
	if b.remain > 0 {
		b.remain -= int64(n)
	}
	if err == io.EOF {
		b.sawEOF = true
		// net/http's body reads from the connection's read buffer,
		// which watchForHangUp gives back to its pool: a reference
		// kept here would keep that buffer reachable from the request,
		// and so allocated, for as long as the handler holds it (a
		// stream's whole life), however often the pool hands it out.
		b.ReadCloser = http.NoBody
		b.w.c.watchForHangUp()
	} else if err != nil {
		b.err = err
	}
	return n, err
}

func (b *body) Close() error {
	b.closed = true
	return nil
}
