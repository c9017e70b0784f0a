package main

import (
	"net/http"

	"gatehouse/internal/config"
	"gatehouse/internal/provider"
	"gatehouse/internal/providers"
)

// providerTypes is the registry of the provider types this build serves
// (internal/providers). Adding a provider: docs/providers.md.
func providerTypes() *provider.Registry { return providers.Builtin() }

// providerSettings is a configured provider in the provider packages'
// terms.
func providerSettings(p *config.Provider) provider.Settings {
	s := provider.Settings{
		Name: p.Name, Type: p.Type, BaseURL: p.BaseURL, APIKey: p.APIKey, Preset: p.Preset,
		APIVersion: p.APIVersion, Region: p.Region, Local: p.Local,
		StreamUsage:     p.StreamUsage == nil || *p.StreamUsage,
		DropUnsupported: p.DropUnsupported,
		ResponsesAPI:    p.ResponsesAPI,
		Header:          http.Header{},

		MaxResponseBytes: p.MaxResponseBytes,
	}
	for k, v := range p.Headers {
		s.Header.Set(k, v)
	}
	return s
}

// providerDeployment builds the parts of a deployment that depend only on
// the provider: address, credentials, adapter and HTTP client.
func providerDeployment(types *provider.Registry, p *config.Provider) (provider.Deployment, *http.Transport, error) {
	return types.Deployment(providerSettings(p))
}
