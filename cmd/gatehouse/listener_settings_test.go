package main

import (
	"testing"
	"time"

	"gatehouse/internal/config"
)

// A reload warns exactly when a setting fixed at start changes: every
// listener field counts, server.max_body_bytes (applied per generation)
// does not, and pointers are compared by what they hold.
func TestListenerSettingsChanged(t *testing.T) {
	base := func() *config.Config {
		on := true
		return &config.Config{Listen: "127.0.0.1:8080", Server: config.Server{
			MaxBodyBytes: 1 << 20, ShutdownGrace: config.Duration(time.Second), ReadHeaderTimeout: config.Duration(time.Second),
			MaxHeaderBytes: 32 << 10, BodyReadTimeout: config.Duration(time.Second), H2C: &on,
			TLS: &config.TLS{CertFile: "c.pem", KeyFile: "k.pem"}}}
	}
	if first, second := listenerOf(base()), listenerOf(base()); first != second {
		t.Fatal("equal configs (distinct pointers) read as changed")
	}
	same := base()
	same.Server.MaxBodyBytes = 2 << 20
	if listenerOf(same) != listenerOf(base()) {
		t.Error("server.max_body_bytes applies at once, yet reads as a listener change")
	}
	off := false
	for name, change := range map[string]func(*config.Config){
		"listen":              func(c *config.Config) { c.Listen = "127.0.0.1:9090" },
		"read_header_timeout": func(c *config.Config) { c.Server.ReadHeaderTimeout = config.Duration(2 * time.Second) },
		"body_read_timeout":   func(c *config.Config) { c.Server.BodyReadTimeout = config.Duration(2 * time.Second) },
		"shutdown_grace":      func(c *config.Config) { c.Server.ShutdownGrace = config.Duration(2 * time.Second) },
		"max_header_bytes":    func(c *config.Config) { c.Server.MaxHeaderBytes = 64 << 10 },
		"h2c":                 func(c *config.Config) { c.Server.H2C = &off },
		"http1_engine":        func(c *config.Config) { c.Server.HTTP1Engine = config.EngineGatehouse },
		"tls files":           func(c *config.Config) { c.Server.TLS = &config.TLS{CertFile: "other.pem", KeyFile: "k.pem"} },
		"tls off":             func(c *config.Config) { c.Server.TLS = nil },
	} {
		c := base()
		change(c)
		if listenerOf(c) == listenerOf(base()) {
			t.Errorf("%s changed, not seen as a listener change", name)
		}
	}
}
