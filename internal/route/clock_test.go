package route

import (
	"context"
	"sync"
	"time"
)

// fakeClock moves only when told to, or when something sleeps on it.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
	// block makes Sleep wait for its context instead of advancing, and
	// announces the sleep on sleeping.
	block    bool
	sleeping chan time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.slept = append(c.slept, d)
	block := c.block
	c.mu.Unlock()
	if block {
		if c.sleeping != nil {
			c.sleeping <- d
		}
		<-ctx.Done()
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Advance(d)
	return nil
}

func (c *fakeClock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.slept...)
}
