package main

import (
	"net/http"
	"strings"

	"gatehouse/internal/config"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/gemini"
)

// geminiDeployment completes d for the Google AI Gemini API. base_url
// defaults to https://generativelanguage.googleapis.com/v1beta and
// includes the API version; the key goes in the x-goog-api-key header.
func geminiDeployment(p *config.Provider, d provider.Deployment) (provider.Deployment, *http.Transport, error) {
	base := p.BaseURL
	if base == "" {
		base = gemini.DefaultBaseURL
	}
	d.BaseURL = strings.TrimRight(base, "/")
	d.Adapter = gemini.Adapter{}
	t := provider.NewTransport()
	d.Client = &http.Client{Transport: t}
	return d, t, nil
}
