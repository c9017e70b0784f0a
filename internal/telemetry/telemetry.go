// Package telemetry exports gatehouse's OpenTelemetry traces: one server
// span per API request with children for admission, each upstream
// attempt and the stream relay, named and attributed after the
// OpenTelemetry GenAI semantic conventions (gen_ai.*), sent over OTLP/HTTP
// in protobuf by a batching processor. W3C trace context from the client
// continues its trace and goes upstream with each attempt.
//
// It owns the OpenTelemetry SDK so nothing else imports it; the server
// sees only Tracer and Span. A nil *Tracer (traces off, the default) and
// the Spans it returns record nothing and cost a nil check.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// BatchTimeout is the longest a finished span waits before it is sent:
// the bound is 5 seconds from the request's end.
const BatchTimeout = 2 * time.Second

// Options configure the exporter.
type Options struct {
	// Endpoint is the OTLP/HTTP base URL (spans go to Endpoint +
	// "/v1/traces"); "" uses OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT from the environment, as the SDK reads
	// them.
	Endpoint string
	// SampleRatio is the share of new traces recorded, 0 to 1; a trace
	// the client started keeps the client's sampling decision.
	SampleRatio float64
	// Version is gatehouse's, for the service.version resource attribute.
	Version string
}

// Tracer starts gatehouse's spans.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	tr   trace.Tracer
	prop propagation.TextMapPropagator
}

// New starts the exporter. It does not dial: a collector that is down
// loses spans (the exporter logs nothing here), never requests.
func New(ctx context.Context, o Options) (*Tracer, error) {
	var opts []otlptracehttp.Option
	if o.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimRight(o.Endpoint, "/")+"/v1/traces"))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	res := resource.NewWithAttributes("", attribute.String("service.name", "gatehouse"), attribute.String("service.version", o.Version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(BatchTimeout)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))),
	)
	return &Tracer{tp: tp, tr: tp.Tracer("gatehouse"),
		prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}, nil
}

// Shutdown sends the spans still queued and stops the exporter.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Span is one span in the making; the zero Span records nothing.
type Span struct {
	s   trace.Span
	ctx context.Context // carries s, for children
}

// Request starts the server span of an API request, continuing the
// trace of the client's traceparent header if it sent one. The name is
// set once the model is known (SetName).
func (t *Tracer) Request(r *http.Request) Span {
	if t == nil {
		return Span{}
	}
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	// Named after the route's pattern until the model is known: a path
	// with an id in it (/v1/responses/{id}) would make every span name new.
	route := r.Pattern
	if route == "" {
		route = r.URL.Path
	}
	ctx, s := t.tr.Start(ctx, "gen_ai "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	return Span{s: s, ctx: ctx}
}

// Child starts a span under s: kind client for an upstream call,
// internal otherwise.
func (s Span) Child(t *Tracer, name string, client bool) Span {
	if s.s == nil {
		return Span{}
	}
	kind := trace.SpanKindInternal
	if client {
		kind = trace.SpanKindClient
	}
	ctx, c := t.tr.Start(s.ctx, name, trace.WithSpanKind(kind))
	return Span{s: c, ctx: ctx}
}

// Inject writes s's trace context into an outgoing request's headers (W3C
// traceparent and tracestate), so the upstream's spans join the trace.
func (s Span) Inject(t *Tracer, h http.Header) {
	if s.s == nil {
		return
	}
	t.prop.Inject(s.ctx, propagation.HeaderCarrier(h))
}

// On reports whether s records anything: callers skip building
// attributes for a span that would drop them.
func (s Span) On() bool { return s.s != nil && s.s.IsRecording() }

// SetName renames the span.
func (s Span) SetName(name string) {
	if s.s != nil {
		s.s.SetName(name)
	}
}

// Str, Int and Float set one attribute each.
func (s Span) Str(k, v string) {
	if s.s != nil && v != "" {
		s.s.SetAttributes(attribute.String(k, v))
	}
}

func (s Span) Int(k string, v int) {
	if s.s != nil {
		s.s.SetAttributes(attribute.Int(k, v))
	}
}

func (s Span) Float(k string, v float64) {
	if s.s != nil {
		s.s.SetAttributes(attribute.Float64(k, v))
	}
}

// Fail marks the span failed with an error type (error.type) and message.
func (s Span) Fail(errorType, msg string) {
	if s.s == nil {
		return
	}
	s.s.SetAttributes(attribute.String("error.type", errorType))
	s.s.SetStatus(codes.Error, msg)
}

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// ErrNoEndpoint says traces were asked for with nowhere to send them.
var ErrNoEndpoint = errors.New("telemetry.traces: no endpoint: set telemetry.traces.endpoint or OTEL_EXPORTER_OTLP_ENDPOINT")
