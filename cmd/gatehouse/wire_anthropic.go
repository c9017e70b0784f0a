package main

import (
	"net/http"
	"strings"

	"gatehouse/internal/config"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/anthropic"
)

// anthropicDeployment completes d for Anthropic's Messages API. base_url
// defaults to https://api.anthropic.com; a trailing /v1 is tolerated (the
// adapter adds /v1/messages itself), since users often paste the API root.
func anthropicDeployment(p *config.Provider, d provider.Deployment) (provider.Deployment, *http.Transport, error) {
	base := strings.TrimRight(p.BaseURL, "/")
	if base == "" {
		base = anthropic.DefaultBaseURL
	}
	d.BaseURL = strings.TrimSuffix(base, "/v1")
	d.Adapter = anthropic.Adapter{}
	t := provider.NewTransport()
	d.Client = &http.Client{Transport: t}
	return d, t, nil
}
