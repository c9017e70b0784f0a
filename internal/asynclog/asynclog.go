// Package asynclog moves log output off the request path: Write copies the
// line into a bounded queue and returns, and one goroutine, waking every
// Interval, batches lines to the real output. When the queue is full lines are dropped and
// counted rather than making a request wait on a slow terminal or disk.
package asynclog

import (
	"bufio"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Interval is how often the writer goroutine wakes to write what has been
// queued. Waking on a timer rather than on every line keeps the request
// path from paying a goroutine wake-up per log line; a crash loses at most
// this much of the log.
const Interval = 20 * time.Millisecond

// Writer is an asynchronous, line-oriented io.Writer. Each Write should be
// one whole log record (slog handlers write exactly that).
type Writer struct {
	mu      sync.RWMutex // guards closing ch against concurrent sends
	closed  bool
	ch      chan *[]byte
	closing chan struct{} // closed by Close: wake the writer at once
	out     io.Writer
	dropped atomic.Uint64
	done    chan struct{}
	pool    sync.Pool
}

// New starts a Writer in front of out holding at most queue pending lines.
func New(out io.Writer, queue int) *Writer {
	w := &Writer{ch: make(chan *[]byte, queue), closing: make(chan struct{}), out: out, done: make(chan struct{})}
	w.pool.New = func() any { b := make([]byte, 0, 512); return &b }
	go w.run()
	return w
}

// Write queues a copy of p. It never blocks and never fails; a line that
// does not fit in the queue is dropped and counted.
func (w *Writer) Write(p []byte) (int, error) {
	b := w.Line()
	*b = append(*b, p...)
	w.Queue(b)
	return len(p), nil
}

// Line returns an empty buffer for one whole line, to be handed to
// Queue once written: a caller that writes its line there saves Write's
// copy of it (and a buffer of its own to write it in).
func (w *Writer) Line() *[]byte {
	b := w.pool.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// Queue queues the line in b, a buffer from Line, which is the Writer's
// from then on: the caller must not touch it again. Like Write, it never
// blocks; a line that does not fit is dropped and counted.
func (w *Writer) Queue(b *[]byte) {
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		_, _ = w.out.Write(*b) // after Close, write through
		w.pool.Put(b)
		return
	}
	select {
	case w.ch <- b:
	default:
		w.dropped.Add(1)
		w.pool.Put(b)
	}
	w.mu.RUnlock()
}

// Dropped reports how many lines were lost to a full queue.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

func (w *Writer) run() {
	defer close(w.done)
	bw := bufio.NewWriterSize(w.out, 64<<10)
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for {
		open := w.drain(bw)
		_ = bw.Flush()
		if !open {
			break
		}
		select {
		case <-tick.C:
		case <-w.closing:
		}
	}
	if n := w.dropped.Load(); n > 0 {
		fmt.Fprintf(bw, `{"level":"WARN","msg":"log lines dropped: queue full","dropped":%d}`+"\n", n)
	}
	_ = bw.Flush()
}

// drain writes every queued line without waiting for more. It reports
// false once the queue is closed and empty.
func (w *Writer) drain(bw *bufio.Writer) bool {
	for {
		select {
		case b, ok := <-w.ch:
			if !ok {
				return false
			}
			_, _ = bw.Write(*b)
			if cap(*b) <= 16<<10 {
				w.pool.Put(b)
			}
		default:
			return true
		}
	}
}

// Close flushes everything queued and stops the goroutine. Later writes go
// straight to the underlying writer.
func (w *Writer) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.ch)
		close(w.closing)
	}
	w.mu.Unlock()
	<-w.done
	return nil
}
