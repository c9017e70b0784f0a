package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"gatehouse/internal/llm"
)

// Timeouts bound one upstream call. A zero field means no limit.
type Timeouts struct {
	Connect   time.Duration // TCP (and TLS) connection set-up
	FirstByte time.Duration // request sent → response headers and first stream event
	Idle      time.Duration // longest gap between two stream events
	Total     time.Duration // the whole call, body included
}

// The causes a Call cancels its context with; Err turns them into 504s.
var (
	ErrFirstByteTimeout = errors.New("upstream first-byte timeout")
	ErrIdleTimeout      = errors.New("upstream idle timeout")
	ErrTotalTimeout     = errors.New("upstream total timeout")
)

const (
	phaseFirstByte int32 = iota
	phaseStreaming
	phaseDone
)

// Call is one upstream exchange and its deadlines. Its context is derived
// from the client's request context, so a client that goes away cancels
// the upstream request too. One timer serves first-byte and then idle
// deadlines.
//
// Keeping a stream alive costs a clock read per event, not a timer reset:
// each event only notes when it came (last), and the idle timer, set once
// when the stream starts, looks at that note when it fires and sets
// itself again for what is left of the idle time since the last event.
// It fires at the same moment a timer reset at every event would, and it
// fires about once an idle period instead of being moved ten times a
// second by each of a thousand streams.
type Call struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	t      Timeouts
	phase  atomic.Int32
	gap    *time.Timer // first-byte, then idle deadline
	total  *time.Timer
	// last is when the latest event came, as clock() read then.
	last atomic.Int64
	// idle is set once gap serves the idle deadline (after the first event).
	idle bool
	// clock is the time since the call began, on the monotonic clock;
	// tests replace it.
	clock func() time.Duration
}

type connectTimeoutKey struct{}

// StartCall begins an upstream call under parent with the given timeouts.
// Stop must be called when the call is over.
func StartCall(parent context.Context, t Timeouts) *Call {
	ctx, cancel := context.WithCancelCause(parent)
	if t.Connect > 0 {
		ctx = context.WithValue(ctx, connectTimeoutKey{}, t.Connect)
	}
	began := time.Now()
	c := &Call{ctx: ctx, cancel: cancel, t: t, clock: func() time.Duration { return time.Since(began) }}
	switch {
	case t.FirstByte > 0:
		c.gap = time.AfterFunc(t.FirstByte, c.gapExpired)
	case t.Idle > 0:
		// The timer exists before any event, so that gapExpired, which
		// sets it again, never sees it unset; the first event starts it.
		c.gap = time.AfterFunc(t.Idle, c.gapExpired)
		c.gap.Stop()
	}
	if t.Total > 0 {
		c.total = time.AfterFunc(t.Total, func() { c.cancel(ErrTotalTimeout) })
	}
	return c
}

// Context is the context upstream requests must use.
func (c *Call) Context() context.Context { return c.ctx }

func (c *Call) gapExpired() {
	switch c.phase.Load() {
	case phaseFirstByte:
		c.cancel(ErrFirstByteTimeout)
	case phaseStreaming:
		if quiet := c.clock() - time.Duration(c.last.Load()); quiet < c.t.Idle {
			c.gap.Reset(c.t.Idle - quiet) // an event came since the timer was set
			if c.phase.Load() == phaseDone {
				c.gap.Stop() // Stop ran meanwhile: the call holds no timer after it
			}
			return
		}
		c.cancel(ErrIdleTimeout)
	}
}

// Progress records that the upstream answered something (headers, a
// stream event): the first-byte deadline is over and the idle deadline
// restarts.
func (c *Call) Progress() {
	if c.phase.Load() == phaseFirstByte { // a load, not a swap, on every event after the first
		c.phase.CompareAndSwap(phaseFirstByte, phaseStreaming)
	}
	c.Touch()
}

// Touch restarts the idle deadline; call it on every stream event. Only
// the first call moves the timer (from the first-byte deadline to the
// idle one); later calls note the time, which the timer reads when it
// fires (see Call).
func (c *Call) Touch() {
	if c.t.Idle <= 0 {
		if c.gap != nil {
			c.gap.Stop()
		}
		return
	}
	c.last.Store(int64(c.clock()))
	if !c.idle {
		c.idle = true
		c.gap.Reset(c.t.Idle)
	}
}

// Stop ends the call, releasing its timers and anything still using its
// context (such as an upstream body nobody reads any more).
func (c *Call) Stop() {
	c.phase.Store(phaseDone)
	if c.gap != nil {
		c.gap.Stop()
	}
	if c.total != nil {
		c.total.Stop()
	}
	c.cancel(context.Canceled)
}

// Err classifies a failure of this call (sending, or reading the body) as
// a gateway error, telling a timeout from a client that left from a
// connection that failed.
func (c *Call) Err(provider string, err error) *llm.Error {
	var ge *llm.Error
	if errors.As(err, &ge) {
		return ge
	}
	switch cause := context.Cause(c.ctx); {
	case cause == ErrFirstByteTimeout:
		return timeoutError(provider, "did not start responding within "+c.t.FirstByte.String(), err)
	case cause == ErrIdleTimeout:
		return timeoutError(provider, "sent nothing for "+c.t.Idle.String()+" in the middle of a stream", err)
	case cause == ErrTotalTimeout:
		// Total is what was left of the model's total after earlier
		// attempts: 1.999993798s reads better as 2s.
		return timeoutError(provider, "did not finish within "+c.t.Total.Round(time.Millisecond).String(), err)
	case errors.Is(cause, context.Canceled):
		return &llm.Error{Kind: llm.KindCanceled, Status: 499, Message: "client closed the request", Cause: err}
	}
	return TransportError(provider, err)
}

func timeoutError(provider, what string, cause error) *llm.Error {
	return &llm.Error{Kind: llm.KindUpstreamTimeout, Status: http.StatusGatewayTimeout, Type: "timeout",
		Code: "upstream_timeout", Message: fmt.Sprintf("provider %q %s", provider, what), Cause: cause}
}

// TransportError classifies an error from sending a request upstream.
func TransportError(provider string, err error) *llm.Error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		if op.Timeout() {
			return timeoutError(provider, "could not be connected to in time", err)
		}
		return &llm.Error{Kind: llm.KindUpstreamConnect, Status: http.StatusBadGateway, Type: "server_error",
			Code: "upstream_unreachable", Message: fmt.Sprintf("could not connect to provider %q", provider), Cause: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return timeoutError(provider, "timed out", err)
	}
	if why := tlsFailure(err); why != "" {
		return &llm.Error{Kind: llm.KindUpstreamTLS, Status: http.StatusBadGateway, Type: "server_error",
			Code: "upstream_tls_error", Message: fmt.Sprintf("provider %q failed: %s", provider, why), Cause: err}
	}
	return &llm.Error{Kind: llm.KindUpstreamProtocol, Status: http.StatusBadGateway, Type: "server_error",
		Code: "upstream_error", Message: fmt.Sprintf("provider %q failed: connection error", provider), Cause: err}
}

// NewTransport returns the HTTP transport gatehouse uses for one provider
// with a default Dialer (NewTransportWith).
func NewTransport() *http.Transport { return NewTransportWith(NewDialer()) }

// NewTransportWith returns the HTTP transport gatehouse uses for one
// provider: a large idle pool (the gateway funnels many clients into few
// upstreams), no transparent compression (streams must pass event by
// event), and d to connect, which honours the connect timeout of the call
// that dials and retries a connect that failed before anything was sent.
func NewTransportWith(d *Dialer) *http.Transport {
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         d.DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
		// Each upstream connection keeps its write buffer for life, and a
		// stream's connection is busy for as long as the stream: the
		// default 4 KiB is 4 KiB per open stream spent on a request that
		// went out at its start. Request headers fit in 1 KiB; a larger
		// body fills the buffer once, which is flushed, and the rest is
		// written straight through (bufio does not copy what it cannot
		// hold), so the count of writes does not grow with the body.
		WriteBufferSize: 1 << 10,
		// The read buffer too is kept for the connection's life, and a
		// stream waits on it between events. 1 KiB holds the chunk-size
		// line and an event or more; the SSE reader above it assembles
		// longer lines (and so does the header parser), and a read into
		// a larger slice (a non-streamed body) bypasses it.
		ReadBufferSize: 1 << 10,
	}
}
