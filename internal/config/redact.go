package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
)

// Secrets (admin_key, api_key, key, header values and passwords inside
// URLs) must never reach a log line or an error. Every type holding one
// formats itself redacted for %v, %+v and %#v, and implements slog.LogValuer.
// Code that needs the secret reads the field.

const redacted = "[redacted]"

func mask(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

// redactURL hides a URL's password and query values (some APIs take the
// key as ?key=...). Text that is not a URL is masked whole if it may hold a
// password, as a key=value DSN can.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if head, userinfo, tail, ok := multiHostUserinfo(s); ok && err != nil {
		// A list of IPv6 hosts, which url.Parse cannot read.
		user := parseUserinfo(userinfo)
		switch {
		case user == nil:
			return head + redacted + "@" + tail
		case hasPassword(user):
			return head + url.UserPassword(user.Username(), "redacted").String() + "@" + tail
		}
		return s
	}
	if err != nil || u.Scheme == "" {
		if strings.Contains(strings.ToLower(s), "password") {
			return redacted
		}
		return s
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "redacted")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"redacted"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// hasPassword says whether u holds a password, even an empty one.
func hasPassword(u *url.Userinfo) bool {
	_, has := u.Password()
	return has
}

// urlSecrets lists the secret parts of a URL or DSN, for scrubbing messages.
func urlSecrets(s string) []string {
	u, err := url.Parse(s)
	if _, userinfo, _, ok := multiHostUserinfo(s); ok && err != nil {
		if user := parseUserinfo(userinfo); user != nil {
			p, _ := user.Password()
			return []string{p}
		}
		return []string{userinfo}
	}
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if p, has := u.User.Password(); has {
			out = append(out, p)
		}
	}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	return out
}

// secretValues lists every secret in cfg.
func secretValues(cfg *Config) []string {
	out := []string{cfg.AdminKey}
	for _, a := range cfg.AdminKeys {
		out = append(out, a.Key)
	}
	out = append(out, urlSecrets(cfg.Storage.Redis)...)
	out = append(out, urlSecrets(cfg.Storage.Postgres)...)
	for _, p := range cfg.Providers {
		out = append(out, p.APIKey)
		out = append(out, urlSecrets(p.BaseURL)...)
		for _, v := range p.Headers {
			out = append(out, v)
		}
	}
	for _, k := range cfg.Keys {
		out = append(out, k.Key)
	}
	return out
}

// Redacted returns a copy of c with every secret replaced, safe to print
// or serve. It shares nothing mutable with c.
func (c *Config) Redacted() *Config {
	r := *c
	r.AdminKey = mask(c.AdminKey)
	if c.AdminKeys != nil {
		r.AdminKeys = make([]AdminKey, len(c.AdminKeys))
		for i, a := range c.AdminKeys {
			r.AdminKeys[i] = a.redacted()
		}
	}
	r.Storage = c.Storage.redacted()
	r.Providers = make([]Provider, len(c.Providers))
	for i, p := range c.Providers {
		r.Providers[i] = p.redacted()
	}
	r.Models = make([]Model, len(c.Models))
	for i, m := range c.Models {
		m.Targets = slices.Clone(m.Targets)
		r.Models[i] = m
	}
	r.Keys = make([]Key, len(c.Keys))
	for i, k := range c.Keys {
		r.Keys[i] = k.redacted()
	}
	if c.Log.Requests != nil {
		r.Log.Requests = ptr(*c.Log.Requests)
	}
	r.buildIndex()
	return &r
}

// configView is Config without its indexes, for printing.
type configView struct {
	Listen    string
	AdminKey  string
	AdminKeys []AdminKey
	Storage   Storage
	Server    Server
	Timeouts  Timeouts
	Log       Log
	Providers []Provider
	Models    []Model
	Keys      []Key
	Cache     Cache
}

func (c Config) view() configView {
	r := c.Redacted()
	return configView{r.Listen, r.AdminKey, r.AdminKeys, r.Storage, r.Server, r.Timeouts, r.Log, r.Providers, r.Models, r.Keys, r.Cache}
}

// String prints c with its secrets redacted.
func (c Config) String() string { return fmt.Sprintf("%+v", c.view()) }

// GoString prints c for %#v with its secrets redacted.
func (c Config) GoString() string { return fmt.Sprintf("config.Config%+v", c.view()) }

// LogValue logs c with its secrets redacted.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

func (s Storage) redacted() Storage {
	return Storage{SQLite: s.SQLite, Redis: redactURL(s.Redis), Postgres: redactURL(s.Postgres)}
}

// String prints s with passwords redacted.
func (s Storage) String() string {
	r := s.redacted()
	return fmt.Sprintf("{SQLite:%s Redis:%s Postgres:%s}", r.SQLite, r.Redis, r.Postgres)
}

// GoString prints s for %#v with passwords redacted.
func (s Storage) GoString() string { return "config.Storage" + s.String() }

func (p Provider) redacted() Provider {
	p.APIKey = mask(p.APIKey)
	p.BaseURL = redactURL(p.BaseURL)
	if p.Headers != nil {
		h := make(map[string]string, len(p.Headers))
		for k, v := range p.Headers {
			h[k] = mask(v)
		}
		p.Headers = h
	}
	if p.StreamUsage != nil {
		p.StreamUsage = ptr(*p.StreamUsage)
	}
	return p
}

// String prints p with its API key, header values and URL credentials
// redacted.
func (p Provider) String() string {
	r := p.redacted()
	return fmt.Sprintf("{Name:%s Type:%s Preset:%s BaseURL:%s APIKey:%s Local:%t Headers:%v StreamUsage:%s}",
		r.Name, r.Type, r.Preset, r.BaseURL, r.APIKey, r.Local, r.Headers, boolPtr(r.StreamUsage))
}

// GoString prints p for %#v, redacted.
func (p Provider) GoString() string { return "config.Provider" + p.String() }

// LogValue logs p, redacted.
func (p Provider) LogValue() slog.Value {
	r := p.redacted()
	return slog.GroupValue(slog.String("name", r.Name), slog.String("type", r.Type),
		slog.String("base_url", r.BaseURL), slog.String("api_key", r.APIKey))
}

func (k Key) redacted() Key {
	k.Key = mask(k.Key)
	if k.Budget != nil {
		k.Budget = ptr(*k.Budget)
	}
	k.Models = slices.Clone(k.Models)
	k.Providers = slices.Clone(k.Providers)
	return k
}

// String prints k with the key itself redacted.
func (k Key) String() string {
	budget := "<nil>"
	if k.Budget != nil {
		budget = fmt.Sprintf("%+v", *k.Budget)
	}
	return fmt.Sprintf("{Key:%s Name:%s Project:%s RPM:%d TPM:%d Budget:%s Models:%v Providers:%v}",
		mask(k.Key), k.Name, k.Project, k.RPM, k.TPM, budget, k.Models, k.Providers)
}

// GoString prints k for %#v, redacted.
func (k Key) GoString() string { return "config.Key" + k.String() }

// LogValue logs k, redacted.
func (k Key) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", k.Name), slog.String("project", k.Project), slog.String("key", mask(k.Key)))
}

// String prints l with Requests as a value rather than a pointer.
func (l Log) String() string {
	return fmt.Sprintf("{Level:%s Requests:%s}", l.Level, boolPtr(l.Requests))
}

func boolPtr(b *bool) string {
	if b == nil {
		return "<nil>"
	}
	return fmt.Sprint(*b)
}
