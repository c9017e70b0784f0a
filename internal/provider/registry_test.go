package provider_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"gatehouse/internal/provider"
	"gatehouse/internal/provider/ollama"
	"gatehouse/internal/provider/openai"
)

func registry() *provider.Registry {
	r := &provider.Registry{}
	r.Register(openai.Type())
	r.Register(openai.CompatibleType())
	r.Register(ollama.Type())
	return r
}

func TestRegistryBuildsSharedFieldsAndTheTypesOwn(t *testing.T) {
	r := registry()
	h := http.Header{"X-Org": {"acme"}}
	d, tr, err := r.Deployment(provider.Settings{Name: "local", Type: "openai-compatible", Preset: "vllm",
		APIKey: "sk-x", StreamUsage: true, DropUnsupported: true, Header: h})
	if err != nil {
		t.Fatal(err)
	}
	if d.Provider != "local" || d.Type != "openai-compatible" || d.APIKey != "sk-x" || !d.StreamUsage || !d.DropUnsupported {
		t.Fatalf("shared fields not copied: %+v", d)
	}
	if d.BaseURL != "http://127.0.0.1:8000/v1" || !d.LocalPricing {
		t.Fatalf("preset: base %q local pricing %v", d.BaseURL, d.LocalPricing)
	}
	if tr == nil || d.Client == nil || d.Client.Transport != tr {
		t.Fatalf("the gateway's upstream transport was not given: %v %v", tr, d.Client)
	}
	h.Set("X-Org", "changed")
	if d.Header.Get("X-Org") != "acme" {
		t.Fatal("the deployment's headers alias the settings'")
	}

	d, _, err = r.Deployment(provider.Settings{Name: "oa", Type: "openai", BaseURL: "https://proxy.example/v1/"})
	if err != nil || d.BaseURL != "https://proxy.example/v1" || d.LocalPricing {
		t.Fatalf("openai: %v base %q local %v", err, d.BaseURL, d.LocalPricing)
	}
	if _, _, err := r.Deployment(provider.Settings{Name: "x", Type: "openai-compatible"}); err == nil || !strings.Contains(err.Error(), "base_url is required") {
		t.Fatalf("no base_url: %v", err)
	}
}

func TestRegistryRefusesUnknownTypesNamingTheKnown(t *testing.T) {
	_, _, err := registry().Deployment(provider.Settings{Name: "p", Type: "cohere"})
	if !errors.Is(err, provider.ErrUnknownType) || !strings.Contains(err.Error(), "openai, openai-compatible, ollama") {
		t.Fatalf("err %v", err)
	}
}

func TestRegistryDiscoversThroughTheAdapter(t *testing.T) {
	r := registry()
	box, _, _ := r.Deployment(provider.Settings{Name: "box", Type: "ollama"})
	oa, _, _ := r.Deployment(provider.Settings{Name: "oa", Type: "openai"})
	off, on := false, true
	for _, c := range []struct {
		d        *provider.Deployment
		discover *bool
		want     bool
	}{{&box, nil, true}, {&box, &off, false}, {&box, &on, true}, {&oa, nil, false}, {&oa, &on, false}} {
		if got := r.Discovers(c.d, c.discover); got != c.want {
			t.Errorf("%s discover=%v: %v, want %v", c.d.Type, c.discover, got, c.want)
		}
	}
	if got := r.Accepting(provider.OptionDiscover); !slices.Equal(got, []string{"ollama"}) {
		t.Errorf("accepting discover: %v", got)
	}
}

func TestRegistryRefusesBadRegistrations(t *testing.T) {
	noop := func(provider.Settings, *provider.Deployment) error { return nil }
	for name, typ := range map[string]provider.Type{
		"no name":              {New: noop},
		"no constructor":       {Name: "x"},
		"twice":                openai.Type(),
		"discovers, no option": {Name: "y", New: noop, DiscoverByDefault: true},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: registered", name)
				}
			}()
			registry().Register(typ)
		}()
	}
}

// TestRegistryResponsesAPI: the type's default decides unless the config
// does, and only for adapters that can send Responses requests.
func TestRegistryResponsesAPI(t *testing.T) {
	native := provider.Type{Name: "native", Options: []provider.Option{provider.OptionResponsesAPI}, ResponsesAPIByDefault: true,
		New: func(s provider.Settings, d *provider.Deployment) error { d.Adapter = responsesAdapter{}; return nil }}
	optIn := provider.Type{Name: "opt-in", Options: []provider.Option{provider.OptionResponsesAPI},
		New: func(s provider.Settings, d *provider.Deployment) error { d.Adapter = responsesAdapter{}; return nil }}
	reg := &provider.Registry{}
	reg.Register(native)
	reg.Register(optIn)
	yes, no := true, false
	for _, c := range []struct {
		typ     string
		setting *bool
		want    bool
	}{
		{"native", nil, true}, {"native", &no, false}, {"opt-in", nil, false}, {"opt-in", &yes, true},
	} {
		d, _, err := reg.Deployment(provider.Settings{Name: "p", Type: c.typ, BaseURL: "http://x", ResponsesAPI: c.setting})
		if err != nil || d.ResponsesAPI != c.want {
			t.Errorf("%s %v: %v %v, want %v", c.typ, c.setting, d.ResponsesAPI, err, c.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a type using the Responses API by default without the option was registered")
		}
	}()
	(&provider.Registry{}).Register(provider.Type{Name: "bad", ResponsesAPIByDefault: true, New: native.New})
}

// responsesAdapter is an provider.Adapter that can send Responses requests.
type responsesAdapter struct{ provider.Adapter }

func (responsesAdapter) ResponsesRequest(context.Context, *provider.Deployment, []byte, bool) (*http.Request, error) {
	return nil, nil
}
func (responsesAdapter) HasResponsesAPI(*provider.Deployment) bool { return true }
