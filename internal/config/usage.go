package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Usage records defaults.
const (
	DefaultUsageRetention = Duration(90 * 24 * time.Hour)
	DefaultUsageQueue     = 16384
	DefaultBodyMaxBytes   = 64 << 10
	// DefaultClusterSpillDir is where cluster mode spills usage records
	// while PostgreSQL is unavailable (embedded mode uses a directory
	// beside the SQLite file).
	DefaultClusterSpillDir = "./data/usage-spill"
)

// Usage configures the usage records: one per API request, written off
// the request path to SQLite (embedded) or PostgreSQL (cluster).
type Usage struct {
	// Records turns the records on; default true. Off, the usage API has
	// nothing new to show (spend and budgets are counted either way).
	Records *bool `yaml:"records"`
	// Retention is how long records are kept ("90d", "720h"); default
	// 90d; 0 keeps them forever.
	Retention Duration `yaml:"retention"`
	// SpillDir holds the append-only files records go to while the
	// database is unavailable; default beside the SQLite file, or
	// ./data/usage-spill in cluster mode.
	SpillDir string `yaml:"spill_dir"`
	// Queue bounds the records waiting to be written; default 16384. A
	// full queue spills, it never makes a request wait.
	Queue int `yaml:"queue"`
	// Bodies applies to projects with log_bodies on.
	Bodies Bodies `yaml:"bodies"`
}

// Bodies says how request and response bodies are kept in the records of
// projects that opt in (log_bodies: true).
type Bodies struct {
	// MaxBytes caps each stored body; longer ones are cut. Default 64KiB.
	MaxBytes int64 `yaml:"max_bytes" config:"size"`
	// Redact are extra rules applied before a body is stored, after the
	// built-in ones (API keys, bearer tokens, AWS access keys, card
	// numbers, e-mail addresses).
	Redact []Redaction `yaml:"redact"`
}

// Redaction replaces every match of a regular expression (RE2 syntax).
type Redaction struct {
	Pattern string `yaml:"pattern"`
	Replace string `yaml:"replace"` // default "[REDACTED]"
}

// RecordsOn reports whether usage records are kept.
func (u Usage) RecordsOn() bool { return u.Records == nil || *u.Records }

func (c *checker) usage(u Usage) {
	c.nonNegative("usage.retention", float64(u.Retention))
	c.nonNegative("usage.queue", float64(u.Queue))
	c.nonNegative("usage.bodies.max_bytes", float64(u.Bodies.MaxBytes))
	for i, r := range u.Bodies.Redact {
		p := fmt.Sprintf("usage.bodies.redact[%d].pattern", i)
		if r.Pattern == "" {
			c.errorf(p, "is required")
			continue
		}
		if _, err := regexp.Compile(r.Pattern); err != nil {
			c.errorf(p, "invalid regular expression: %v", err)
		}
	}
}

func usageDefaults(cfg *Config, d *decoder) {
	u := &cfg.Usage
	if !d.set["usage.retention"] {
		u.Retention = DefaultUsageRetention
	}
	if u.Queue == 0 {
		u.Queue = DefaultUsageQueue
	}
	if u.Bodies.MaxBytes == 0 {
		u.Bodies.MaxBytes = DefaultBodyMaxBytes
	}
	if u.Records == nil {
		u.Records = ptr(true)
	}
	if u.SpillDir == "" {
		if cfg.Cluster() || cfg.Storage.SQLite == "" {
			u.SpillDir = DefaultClusterSpillDir
		} else {
			u.SpillDir = filepath.Join(filepath.Dir(cfg.Storage.SQLite), "usage-spill")
		}
	}
}

// parseDuration is time.ParseDuration plus a leading whole number of
// days: "90d", "1d12h". Retention periods are written in days.
func parseDuration(s string) (time.Duration, error) {
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.Atoi(s[:i])
		if err != nil || days < 0 || days > 100*365 {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		rest := time.Duration(0)
		if s[i+1:] != "" {
			if rest, err = time.ParseDuration(s[i+1:]); err != nil || rest < 0 {
				return 0, fmt.Errorf("invalid duration %q", s)
			}
		}
		return time.Duration(days)*24*time.Hour + rest, nil
	}
	return time.ParseDuration(s)
}
