package store

import (
	"context"
	"sync"

	"gatehouse/internal/auth"
)

// maxPending bounds what one slow subscriber may hold back. Past it the
// queue collapses into a single zero Hash ("drop everything"): a cache
// that empties itself is correct, one that misses a revocation is not,
// and a writer must never wait on a reader.
const maxPending = 4096

// Hub fans key changes out to every KeyChanges subscriber of a store. The
// zero Hub is ready to use. Publish never blocks: each subscriber has its
// own queue and a goroutine that feeds its channel, so one slow cache
// cannot stall writes or other caches.
type Hub struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	out  chan auth.Hash
	wake chan struct{} // capacity 1: "the queue is not empty"

	mu      sync.Mutex
	pending []auth.Hash
	flush   bool // the queue overflowed; deliver one zero Hash instead
}

// Subscribe returns a channel of changes published from now until ctx
// ends or the hub is closed, when the channel is closed.
func (h *Hub) Subscribe(ctx context.Context) (<-chan auth.Hash, error) {
	s := &subscriber{out: make(chan auth.Hash, 64), wake: make(chan struct{}, 1)}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, context.Canceled
	}
	if err := ctx.Err(); err != nil {
		h.mu.Unlock()
		return nil, err
	}
	if h.subs == nil {
		h.subs = make(map[*subscriber]struct{})
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	go h.feed(ctx, s)
	return s.out, nil
}

// Publish queues hashes for every subscriber.
func (h *Hub) Publish(hashes ...auth.Hash) {
	if len(hashes) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.push(hashes)
	}
}

// FlushAll tells every subscriber that changes may have been missed.
func (h *Hub) FlushAll() { h.Publish(auth.Hash{}) }

// Close ends every subscription; later Subscribe calls fail.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		close(s.wake) // feed sees a closed wake as "stop"
		delete(h.subs, s)
	}
}

func (s *subscriber) push(hashes []auth.Hash) {
	s.mu.Lock()
	if !s.flush {
		if len(s.pending)+len(hashes) > maxPending {
			s.flush, s.pending = true, s.pending[:0]
		} else {
			s.pending = append(s.pending, hashes...)
		}
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) take() []auth.Hash {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flush {
		s.flush = false
		return []auth.Hash{{}}
	}
	batch := s.pending
	s.pending = nil
	return batch
}

func (s *subscriber) overflowed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flush
}

// feed moves a subscriber's queue into its channel until ctx ends or the
// hub closes; it is the only sender on s.out, so it alone closes it.
func (h *Hub) feed(ctx context.Context, s *subscriber) {
	defer close(s.out)
	defer func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
	}()
	for {
		for _, hash := range s.take() {
			if s.overflowed() {
				break // a flush supersedes the rest of this batch
			}
			select {
			case s.out <- hash:
			case <-ctx.Done():
				return
			}
		}
		select {
		case _, ok := <-s.wake:
			if !ok {
				// Closed hub: hand over what still fits in the buffer, so
				// a change committed just before Close is seen, but never
				// wait on a reader that may be gone.
				for _, hash := range s.take() {
					select {
					case s.out <- hash:
					default:
						return
					}
				}
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
