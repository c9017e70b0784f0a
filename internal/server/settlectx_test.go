package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
)

// hangUpAdmitter cancels the request's context once it has admitted it,
// as a client hanging up does, and notes what its Settle was given.
type hangUpAdmitter struct {
	limit.Admitter
	cancel context.CancelFunc

	settles    int
	err        error
	cause      error
	done       bool // Done() was closed
	value      any
	noDeadline bool
}

type hangUpKey struct{}

func (h *hangUpAdmitter) Admit(ctx context.Context, a limit.Admission) (limit.Decision, error) {
	d, err := h.Admitter.Admit(ctx, a)
	h.cancel()
	return d, err
}

func (h *hangUpAdmitter) Settle(ctx context.Context, r limit.Reservation, actual limit.Actual) error {
	h.settles++
	h.err = ctx.Err()
	h.cause = context.Cause(ctx)
	select {
	case <-ctx.Done():
		h.done = true
	default:
	}
	_, ok := ctx.Deadline()
	h.noDeadline = !ok
	h.value = ctx.Value(hangUpKey{})
	return h.Admitter.Settle(ctx, r, actual)
}

// TestSettleOutlivesHangUp: the settlement of a request whose client has
// gone runs under a context that is not cancelled, has no cause and no
// deadline, yet carries the request's values.
func TestSettleOutlivesHangUp(t *testing.T) {
	s, _ := newTestServer(t) // its one model, "chat", panics once admitted
	e, prices := embeddedLimits(t)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), hangUpKey{}, "request value"))
	defer cancel()
	h := &hangUpAdmitter{Admitter: e, cancel: cancel}
	rt := *s.Runtime()
	rt.Limits = &Limits{Admitter: h, Prices: prices}
	rt.Auth = auth.NewStatic([]auth.StaticKey{{Secret: "k", Principal: auth.Principal{KeyID: "key1", Project: "p", RPM: 10}}})
	s.Swap(&rt)

	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"chat","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer k")
	s.Handler().ServeHTTP(httptest.NewRecorder(), req)
	if ctx.Err() == nil {
		t.Fatal("the request's context was not cancelled: the test tests nothing")
	}
	if h.settles != 1 {
		t.Fatalf("%d settles, want 1", h.settles)
	}
	if h.err != nil || h.done || h.cause != nil {
		t.Errorf("settle's context cancelled (err %v, done %v, cause %v)", h.err, h.done, h.cause)
	}
	if !h.noDeadline {
		t.Error("settle's context has a deadline")
	}
	if h.value != "request value" {
		t.Errorf("settle's context value %v, want the request's", h.value)
	}
}

// hangUpEmbedded is the in-memory admitter, a limit.ContextFreeSettler,
// that cancels the request's context once it has admitted it and notes
// whether its Settle got a cancelled one.
type hangUpEmbedded struct {
	*limit.Embedded
	cancel    context.CancelFunc
	settles   int
	cancelled bool
}

func (h *hangUpEmbedded) Admit(ctx context.Context, a limit.Admission) (limit.Decision, error) {
	d, err := h.Embedded.Admit(ctx, a)
	h.cancel()
	return d, err
}

// AdmitInto is what the server calls on an Embedded (limit.AdmitterInto):
// promoted from it, it would pass the hang-up by.
func (h *hangUpEmbedded) AdmitInto(ctx context.Context, a *limit.Admission, d *limit.Decision) error {
	err := h.Embedded.AdmitInto(ctx, a, d)
	h.cancel()
	return err
}

func (h *hangUpEmbedded) Settle(ctx context.Context, r limit.Reservation, actual limit.Actual) error {
	return h.SettleInPlace(ctx, &r, actual)
}

// SettleInPlace is what the server calls on an Embedded
// (limit.SettlerInPlace): promoted from it, it would not be counted.
func (h *hangUpEmbedded) SettleInPlace(ctx context.Context, r *limit.Reservation, actual limit.Actual) error {
	h.settles++
	h.cancelled = ctx.Err() != nil
	return h.Embedded.SettleInPlace(ctx, r, actual)
}

// TestContextFreeSettleAfterHangUp: an admitter that settles in memory
// is handed the request's own context, cancelled by the hang-up, and
// the reservation is released all the same; an admitter that is not
// one (TestSettleOutlivesHangUp) gets a context that outlives it.
func TestContextFreeSettleAfterHangUp(t *testing.T) {
	s, _ := newTestServer(t) // its one model, "chat", panics once admitted
	e, prices := embeddedLimits(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &hangUpEmbedded{Embedded: e, cancel: cancel}
	rt := *s.Runtime()
	rt.Limits = &Limits{Admitter: h, Prices: prices}
	rt.Auth = auth.NewStatic([]auth.StaticKey{{Secret: "k", Principal: auth.Principal{KeyID: "key1", Project: "p", RPM: 10,
		Budget: &auth.Budget{USD: 1, Period: "total"}}}})
	s.Swap(&rt)

	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"chat","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer k")
	s.Handler().ServeHTTP(httptest.NewRecorder(), req)
	if h.settles != 1 || !h.cancelled {
		t.Fatalf("%d settles, under a cancelled context: %v; want 1 under the request's own", h.settles, h.cancelled)
	}
	if got := e.Spent(limit.ScopeKey, "key1", limit.Total, time.Now()); got != 0 {
		t.Fatalf("budget still holds %s after the request that hung up", got)
	}
}

// TestAdmitterOf: the view of a runtime's admitter is made for its
// Limits, and made again when a runtime with other Limits is served,
// in either order.
func TestAdmitterOf(t *testing.T) {
	s, _ := newTestServer(t)
	e, _ := embeddedLimits(t)
	embedded, wrapped := &Limits{Admitter: e}, &Limits{Admitter: &hangUpAdmitter{Admitter: e}}
	for i, l := range []*Limits{embedded, wrapped, wrapped, embedded, wrapped} {
		v := s.admitterOf(l)
		wantInto := l == embedded
		if v.limits != l || (v.into != nil) != wantInto || v.free != wantInto {
			t.Fatalf("call %d: view %+v of %T", i, v, l.Admitter)
		}
	}
}
