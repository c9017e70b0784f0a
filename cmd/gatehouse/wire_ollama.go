package main

import (
	"net/http"
	"strings"

	"gatehouse/internal/config"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/ollama"
)

// ollamaDeployment completes d for an Ollama server: base_url is the
// server's root (default http://localhost:11434), not its /v1 path.
func ollamaDeployment(p *config.Provider, d provider.Deployment) (provider.Deployment, *http.Transport, error) {
	base := p.BaseURL
	if base == "" {
		base = ollama.DefaultBaseURL
	}
	d.BaseURL = strings.TrimRight(base, "/")
	d.Adapter = ollama.Adapter{}
	t := provider.NewTransport()
	d.Client = &http.Client{Transport: t}
	return d, t, nil
}

// discovers reports whether p's models are discovered: discover defaults
// to true for ollama, the only type that has it.
func discovers(p *config.Provider) bool {
	return p.Type == "ollama" && (p.Discover == nil || *p.Discover)
}
