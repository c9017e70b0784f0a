package provider

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// Dial retry defaults: a refused or failed connect is tried again twice,
// after about 25 ms and then 50 ms (±50% jitter), so a burst that
// overflowed the upstream's accept queue or the process's descriptors
// for a moment does not become 502s, while an upstream that is really
// down costs the request under 120 ms more before failover.
const (
	DefaultDialRetries = 2
	DefaultDialBackoff = 25 * time.Millisecond
)

// Dialer opens a transport's upstream connections. A connect that failed
// in a way a moment may cure (refused, reset, out of descriptors or local
// ports) is retried with backoff: nothing has been sent yet, so a retry
// cannot repeat a paid request. It honours the connect timeout of the
// call that dials, over all its tries.
type Dialer struct {
	// Retries is how many times a failed connect is tried again; 0 never.
	Retries int
	// Backoff is the wait before the first retry, doubled before each
	// next, with ±50% jitter.
	Backoff time.Duration

	net     net.Dialer
	retried atomic.Uint64
	onRetry atomic.Pointer[func(error)]
}

// NewDialer returns a Dialer with the default retries.
func NewDialer() *Dialer {
	return &Dialer{Retries: DefaultDialRetries, Backoff: DefaultDialBackoff, net: net.Dialer{KeepAlive: 30 * time.Second}}
}

// Retried is how many connects were retried so far.
func (d *Dialer) Retried() uint64 { return d.retried.Load() }

// OnRetry sets a function told of every retried connect (a metric), with
// the error that caused it. It may be set while the dialer is in use.
func (d *Dialer) OnRetry(fn func(error)) { d.onRetry.Store(&fn) }

// DialContext connects to addr, retrying as the Dialer says.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if t, ok := ctx.Value(connectTimeoutKey{}).(time.Duration); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	wait := d.Backoff
	for try := 0; ; try++ {
		c, err := d.net.DialContext(ctx, network, addr)
		if err == nil || try >= d.Retries || !RetryableDial(err) || ctx.Err() != nil {
			return c, err
		}
		d.retried.Add(1)
		if fn := d.onRetry.Load(); fn != nil {
			(*fn)(err)
		}
		if !pause(ctx, time.Duration(float64(wait)*(0.5+rand.Float64()))) {
			return nil, err
		}
		wait *= 2
	}
}

// pause waits d or until ctx ends, reporting whether the wait ran out.
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// DialCause names the cause of a retryable connect failure for a metric
// label: refused, reset, descriptors, ports, buffers; "other" otherwise.
func DialCause(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED):
		return "reset"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "descriptors"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "ports"
	case errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.EAGAIN):
		return "buffers"
	}
	return "other"
}

// RetryableDial reports whether a connect failed in a way that may pass:
// the upstream refused or reset it (a full accept queue, a restart), or
// this host ran short of descriptors, local ports or buffers. A timeout
// is not among them: it has already used the time a retry would need.
func RetryableDial(err error) bool {
	for _, e := range []syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EMFILE, syscall.ENFILE, syscall.EADDRNOTAVAIL, syscall.ENOBUFS, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
