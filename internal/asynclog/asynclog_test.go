package asynclog

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// blockingWriter holds every write until released, like a stalled terminal.
type blockingWriter struct {
	mu      sync.Mutex
	release chan struct{}
	buf     bytes.Buffer
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func TestWritesArriveInOrderAfterClose(t *testing.T) {
	var out bytes.Buffer
	w := New(&out, 1024)
	var want strings.Builder
	for i := 0; i < 500; i++ {
		line := strings.Repeat("x", i%50) + "\n"
		want.WriteString(line)
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Fatalf("output differs: got %d bytes, want %d", out.Len(), want.Len())
	}
}

func TestFullQueueDropsInsteadOfBlocking(t *testing.T) {
	bw := &blockingWriter{release: make(chan struct{})}
	w := New(bw, 4)
	// The first line is taken by the goroutine and blocks in bw; then the
	// queue fills; the rest must be dropped without blocking this test.
	for i := 0; i < 100; i++ {
		_, _ = w.Write([]byte("line\n"))
	}
	if w.Dropped() == 0 {
		t.Fatal("expected dropped lines with a stalled output")
	}
	close(bw.release)
	_ = w.Close()
	bw.mu.Lock()
	defer bw.mu.Unlock()
	if !strings.Contains(bw.buf.String(), `"dropped":`) {
		t.Fatalf("drop count not reported: %q", bw.buf.String())
	}
}

func TestWriteAfterCloseGoesThrough(t *testing.T) {
	var out bytes.Buffer
	w := New(&out, 8)
	_ = w.Close()
	_, _ = w.Write([]byte("late\n"))
	if out.String() != "late\n" {
		t.Fatalf("got %q", out.String())
	}
}

// TestQueuedLines: lines written into buffers from Line and handed over
// with Queue arrive whole and in order among Write's, each buffer empty
// when given out (reused ones included); after Close, Queue writes
// through.
func TestQueuedLines(t *testing.T) {
	var out bytes.Buffer
	w := New(&out, 1024)
	var want strings.Builder
	for i := range 500 {
		line := strings.Repeat("q", i%70) + "\n"
		want.WriteString(line)
		if i%3 == 0 {
			_, _ = w.Write([]byte(line))
			continue
		}
		b := w.Line()
		if len(*b) != 0 {
			t.Fatalf("line %d: buffer given out holding %q", i, *b)
		}
		*b = append(*b, line...)
		w.Queue(b)
	}
	_ = w.Close()
	b := w.Line()
	*b = append(*b, "late\n"...)
	w.Queue(b)
	want.WriteString("late\n")
	if out.String() != want.String() {
		t.Fatalf("output differs: got %d bytes, want %d", out.Len(), want.Len())
	}
}
