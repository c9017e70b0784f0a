package server

import (
	"time"

	"gatehouse/internal/cache"
	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
	"gatehouse/internal/route"
	"gatehouse/internal/stream"
	"gatehouse/internal/telemetry"
)

// openStream is a streamed answer whose first event went out during its
// attempt, relayed on after the attempt returned (route.Result.Open).
//
// Why: the attempt runs at the bottom of the failover runner, about 8 KB
// of stack below net/http's connection loop, and a stream spends nearly
// all its life waiting for the upstream's next event. Waiting there kept
// every open stream's goroutine on a 16 KiB stack (the runtime shrinks a
// stack only when under a quarter of it is in use); waiting from
// runAttempts, with the runner's frames gone, keeps it on 8 KiB, as the
// plain reverse proxy's. Everything else is as when the relay ran inside
// the attempt: failover ends with the first event, the attempt's lease
// and the upstream call stay held until the relay ends, and a client that
// hangs up cancels the call through the request's context.
type openStream struct {
	relay    *stream.Relayer
	call     *provider.Call
	provider string     // the deployment's, for the call's errors
	st       llm.Stream // closed when the relay ends
	span     telemetry.Span
	start    time.Time       // when the attempt began: its time to first byte counts from here
	rec      *cache.Recorder // what the cache keeps of a completed stream; nil when it keeps nothing
	// count counts the completion tokens of a stream that ended without
	// usage, from what it relayed.
	count func(res *stream.Result)
}

// opened ends an attempt whose relay has started: a stream that is still
// going is left open for runAttempts to relay on (the attempt answered);
// one that already ended, or failed before its first event, is settled
// now as the attempt's result.
func (x *exchange) opened(o *openStream) route.Result {
	if o.relay.Result().Started && !o.relay.Ended() {
		x.written = true
		x.open = o
		return route.Result{Open: true, Started: true}
	}
	return x.relayRest(o)
}

// relayRest relays what is left of o's stream and settles it on the
// exchange: usage (or the count of a stream without), time to first
// token, what the cache keeps. The upstream call and the stream are
// closed before it returns.
func (x *exchange) relayRest(o *openStream) route.Result {
	defer o.call.Stop()
	defer o.st.Close()
	defer o.span.End()
	err := o.relay.Rest()
	res := o.relay.Result()
	o.span.Int("gatehouse.chunks", res.Chunks)
	if res.Started {
		x.written = true
		x.usage, x.hasUsage = res.Usage, res.HasUsage
		if !res.HasUsage {
			o.count(res)
		}
		if !res.FirstChunk.IsZero() {
			x.ttft = res.FirstChunk.Sub(x.start)
			o.span.Float("gatehouse.ttft_ms", ms(x.ttft))
		}
	}
	if err != nil {
		x.cache.pending = nil // a broken answer is not kept
		return route.Result{Err: o.call.Err(o.provider, err), Started: res.Started}
	}
	if o.rec != nil && res.Done {
		if chunks, ok := o.rec.Chunks(); ok {
			x.keepAnswer(&cache.Entry{Chunks: chunks, Usage: res.Usage})
		}
	}
	var ttfb time.Duration
	if !res.FirstChunk.IsZero() {
		ttfb = res.FirstChunk.Sub(o.start)
	}
	return route.Result{FirstByte: ttfb}
}
