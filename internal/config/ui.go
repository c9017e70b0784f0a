package config

import "time"

// UI configures the dashboard under /ui/.
type UI struct {
	// Enabled serves the dashboard; default true. It also needs admin_key
	// (it logs in with it) and a store (SQLite or PostgreSQL keeps its
	// sessions); without them /ui/ says what is missing.
	Enabled *bool `yaml:"enabled"`
	// SessionTTL is how long a login lasts; default 12h, at least 1m,
	// at most 30 days.
	SessionTTL Duration `yaml:"session_ttl"`
}

// DefaultSessionTTL is ui.session_ttl's default.
const DefaultSessionTTL = 12 * time.Hour

// On says whether the dashboard is served.
func (u UI) On() bool { return u.Enabled == nil || *u.Enabled }

func (c *checker) ui(u UI) {
	if t := u.SessionTTL.D(); t != 0 && (t < time.Minute || t > 30*24*time.Hour) {
		c.errorf("ui.session_ttl", "must be from 1m to 720h")
	}
}

func uiDefaults(cfg *Config) {
	if cfg.UI.SessionTTL == 0 {
		cfg.UI.SessionTTL = Duration(DefaultSessionTTL)
	}
}
