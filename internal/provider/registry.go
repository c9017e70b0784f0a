package provider

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
)

// Settings is one configured provider as the provider packages see it: the
// config's fields, without the config package, so a provider package
// imports only provider and llm.
type Settings struct {
	Name            string      // the provider's configured name
	Type            string      // its registered type
	BaseURL         string      // as configured; "" means the type's default
	APIKey          string      // never logged
	Preset          string      // a named server whose base URL the type knows
	APIVersion      string      // a versioned API's version (Azure's api-version)
	Region          string      // a regional API's region (Bedrock's AWS region)
	Local           bool        // the operator's own server: no per-token price
	StreamUsage     bool        // ask the upstream for usage in streams
	DropUnsupported bool        // translating adapters drop what they cannot honour
	Header          http.Header // extra headers sent upstream; may be nil
	// ResponsesAPI says whether Responses API requests go to the server
	// as they are (true) or translated (false); nil leaves it to the type.
	ResponsesAPI *bool
	// MaxResponseBytes bounds a non-streamed upstream body; 0: the
	// package default, MaxResponseBytes.
	MaxResponseBytes int64

	// Getenv reads the process environment, for credentials a type takes
	// from it (Bedrock's AWS variables); nil means os.Getenv. Tests pass
	// their own.
	Getenv func(string) string
}

// Env returns s.Getenv(key), or the process environment's value when
// Getenv is nil.
func (s *Settings) Env(key string) string {
	if s.Getenv == nil {
		return os.Getenv(key)
	}
	return s.Getenv(key)
}

// Option names a type-specific setting beyond those every type takes.
// Validation refuses it on a type that does not accept it.
type Option string

// The type-specific settings.
const (
	OptionPreset     Option = "preset"      // a named server (see Type.Presets)
	OptionAPIVersion Option = "api_version" // Settings.APIVersion
	OptionRegion     Option = "region"      // Settings.Region
	OptionDiscover   Option = "discover"    // model discovery on or off; the adapter must be a Discoverer
	// OptionResponsesAPI is the server's own Responses API on or off;
	// the adapter must be a ResponsesAPI.
	OptionResponsesAPI Option = "responses_api"
)

// BaseURLRule says when a type needs a configured base URL.
type BaseURLRule int

const (
	// BaseURLOptional: the type has a default address.
	BaseURLOptional BaseURLRule = iota
	// BaseURLRequired: every server of the type has its own address
	// (an Azure resource).
	BaseURLRequired
	// BaseURLUnlessPreset: a preset names the address, else base_url must.
	BaseURLUnlessPreset
)

// Type is one kind of provider the gateway can call: its name in the
// config, what its config may say, and how to build a deployment from it.
type Type struct {
	// Name is the config's `type` value.
	Name string
	// New completes d, whose shared fields (name, type, key, headers and
	// flags from the settings) are already set, with everything the type
	// owns: base URL and its normalisation, credentials, the adapter.
	// It leaves d.Client nil to get the shared upstream client
	// (NewTransport), or sets its own (an in-process server). It runs at
	// config load, so a missing credential is a startup error, not a
	// failed request.
	New func(s Settings, d *Deployment) error
	// BaseURL says when a configured base_url is required.
	BaseURL BaseURLRule
	// Presets are the values OptionPreset accepts.
	Presets []string
	// Options are the type-specific settings the type accepts.
	Options []Option
	// DiscoverByDefault turns model discovery on unless the config turns
	// it off; it requires OptionDiscover and a Discoverer adapter.
	DiscoverByDefault bool
	// ResponsesAPIByDefault sends Responses API requests to the server as
	// they are unless the config says otherwise; it requires
	// OptionResponsesAPI and a ResponsesAPI adapter.
	ResponsesAPIByDefault bool
}

// Accepts reports whether the type takes the option.
func (t *Type) Accepts(o Option) bool { return slices.Contains(t.Options, o) }

// Registry maps config type names to provider types. It is a value built
// by the composition root (one Register call per type), not a package
// global: tests build their own with the types they need.
type Registry struct {
	types map[string]*Type
	names []string // in registration order, for messages
}

// Register adds a type. It panics on an empty or repeated name or a nil
// constructor: the registry is built once at start from code, so either
// is a programming error.
func (r *Registry) Register(t Type) {
	if t.Name == "" || t.New == nil {
		panic("provider: Register needs a type name and a constructor")
	}
	if _, dup := r.types[t.Name]; dup {
		panic("provider: type " + t.Name + " registered twice")
	}
	if t.DiscoverByDefault && !t.Accepts(OptionDiscover) {
		panic("provider: type " + t.Name + " discovers by default but does not accept the discover option")
	}
	if t.ResponsesAPIByDefault && !t.Accepts(OptionResponsesAPI) {
		panic("provider: type " + t.Name + " uses the Responses API by default but does not accept the responses_api option")
	}
	if r.types == nil {
		r.types = map[string]*Type{}
	}
	r.types[t.Name] = &t
	r.names = append(r.names, t.Name)
}

// Lookup returns the registered type of that name.
func (r *Registry) Lookup(name string) (*Type, bool) {
	t, ok := r.types[name]
	return t, ok
}

// Names returns the registered type names in registration order.
func (r *Registry) Names() []string { return slices.Clone(r.names) }

// Accepting returns the names of the types that accept o, for messages
// such as "is only allowed with type azure".
func (r *Registry) Accepting(o Option) []string {
	var out []string
	for _, n := range r.names {
		if r.types[n].Accepts(o) {
			out = append(out, n)
		}
	}
	return out
}

// ErrUnknownType is returned by Deployment for a type not registered.
var ErrUnknownType = errors.New("provider type not registered")

// Deployment builds the deployment of one configured provider, without a
// model: the shared fields from s, the rest from the type's constructor.
// The returned transport is the one the deployment's client uses when the
// gateway owns it (nil for a type with its own client), so a replaced
// config can release its idle connections.
func (r *Registry) Deployment(s Settings) (Deployment, *http.Transport, error) {
	t, ok := r.types[s.Type]
	if !ok {
		return Deployment{}, nil, fmt.Errorf("provider %q: %w: %q (this build has %s)", s.Name, ErrUnknownType, s.Type, strings.Join(r.names, ", "))
	}
	d := Deployment{
		Provider:        s.Name,
		Type:            s.Type,
		APIKey:          s.APIKey,
		Local:           s.Local,
		LocalPricing:    s.Local,
		StreamUsage:     s.StreamUsage,
		DropUnsupported: s.DropUnsupported,
		APIVersion:      s.APIVersion,
		Region:          s.Region,
		Header:          http.Header{},

		MaxResponseBytes: s.MaxResponseBytes,
	}
	for k, v := range s.Header {
		d.Header[k] = slices.Clone(v)
	}
	if err := t.New(s, &d); err != nil {
		return Deployment{}, nil, fmt.Errorf("provider %q (type %s): %w", s.Name, s.Type, err)
	}
	d.BaseURL = strings.TrimRight(d.BaseURL, "/")
	if ra, ok := d.Adapter.(ResponsesAPI); ok && t.Accepts(OptionResponsesAPI) {
		d.ResponsesAPI = t.ResponsesAPIByDefault && ra.HasResponsesAPI(&d)
		if s.ResponsesAPI != nil {
			d.ResponsesAPI = *s.ResponsesAPI
		}
	}
	if d.Client != nil {
		return d, nil, nil
	}
	tr := NewTransport()
	d.Client = &http.Client{Transport: tr, CheckRedirect: refuseRedirects}
	return d, tr, nil
}

// Discovers reports whether the deployment's models are listed by
// discovery: its adapter can list them, and the config turned discovery
// on, or left it unset on a type that discovers by default.
func (r *Registry) Discovers(d *Deployment, discover *bool) bool {
	if _, ok := d.Adapter.(Discoverer); !ok {
		return false
	}
	if discover != nil {
		return *discover
	}
	t, ok := r.types[d.Type]
	return ok && t.DiscoverByDefault
}

// BaseURLOr returns base, or def when base is empty; the registry trims
// the trailing slash.
func BaseURLOr(base, def string) string {
	if base == "" {
		return def
	}
	return base
}

// refuseRedirects keeps a provider's redirect from being followed: the
// request carries the provider's credential, which must go to the
// configured address only, and a body the client would have to resend. The
// 3xx reaches the adapter, which reports it as a 502.
func refuseRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
