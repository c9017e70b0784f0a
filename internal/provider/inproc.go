package provider

import (
	"context"
	"io"
	"net/http"
	"sync"
)

// HandlerTransport is an http.RoundTripper that serves requests with an
// in-process http.Handler instead of the network. The built-in "mock"
// provider uses it to run the mockllm emulator inside the gateway, so the
// quick start needs no second process. Responses stream: each Flush of the
// handler reaches the reader at once, and closing the response body (or
// cancelling the request) cancels the handler's context.
type HandlerTransport struct {
	Handler http.Handler
}

// RoundTrip runs the handler in its own goroutine and returns as soon as
// it has written its headers.
func (t HandlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	w := &pipeWriter{
		header:  http.Header{},
		pipe:    pw,
		started: make(chan struct{}),
		status:  http.StatusOK,
	}
	inner := req.Clone(ctx)
	if inner.Body == nil {
		inner.Body = http.NoBody
	}
	if inner.RemoteAddr == "" {
		inner.RemoteAddr = "127.0.0.1:0"
	}
	if inner.RequestURI == "" {
		inner.RequestURI = req.URL.RequestURI()
	}
	go func() {
		defer cancel()
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = io.ErrUnexpectedEOF // the handler aborted mid-response
				}
			}()
			t.Handler.ServeHTTP(w, inner)
		}()
		w.start()
		_ = pw.CloseWithError(err)
	}()
	select {
	case <-w.started:
	case <-ctx.Done():
		// The handler may still start; the pipe close below unblocks it.
		_ = pr.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
	return &http.Response{
		Status:        http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &cancelOnClose{ReadCloser: pr, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	c.cancel()
	return c.ReadCloser.Close()
}

// pipeWriter is the handler's ResponseWriter: headers are snapshotted at
// the first write, and the body goes through a synchronous pipe.
type pipeWriter struct {
	header  http.Header
	sent    http.Header
	pipe    *io.PipeWriter
	once    sync.Once
	started chan struct{}
	status  int
	wrote   bool
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	w.status = code
	w.start()
}

func (w *pipeWriter) start() {
	w.once.Do(func() {
		w.sent = w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.pipe.Write(p)
}

// Flush is a no-op: the pipe has no buffer, every Write already waits for
// the reader.
func (w *pipeWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
}
