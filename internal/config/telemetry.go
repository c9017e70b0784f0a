package config

// Telemetry configures what gatehouse exports besides metrics.
type Telemetry struct {
	// Traces turns OpenTelemetry traces on; absent (the default) is off.
	Traces *Traces `yaml:"traces"`
}

// Traces are OpenTelemetry traces over OTLP/HTTP (protobuf).
type Traces struct {
	// Endpoint is the collector's OTLP/HTTP base URL (spans go to
	// <endpoint>/v1/traces); empty uses OTEL_EXPORTER_OTLP_ENDPOINT (or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) from the environment.
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the share of new traces recorded, 0 to 1; default
	// 1. A trace the client started keeps the client's decision.
	SampleRatio *float64 `yaml:"sample_ratio"`
}

func (c *checker) telemetry(t Telemetry) {
	tr := t.Traces
	if tr == nil {
		return
	}
	if tr.Endpoint != "" && !httpURL(tr.Endpoint) {
		c.errorf("telemetry.traces.endpoint", "must be an absolute http:// or https:// URL")
	}
	if r := tr.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		c.errorf("telemetry.traces.sample_ratio", "must be from 0 to 1")
	}
}

func telemetryDefaults(cfg *Config) {
	if tr := cfg.Telemetry.Traces; tr != nil && tr.SampleRatio == nil {
		tr.SampleRatio = ptr(1.0)
	}
}
