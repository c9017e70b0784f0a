package main

import (
	"net/http"
	"strings"

	"gatehouse/internal/config"
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/azure"
)

// azureDeployment completes d for an Azure OpenAI resource. base_url is
// required (config validation says so); the classic deployments API gets
// the default GA api-version when none is configured, while the v1 API
// (base_url ending in /openai/v1) takes none.
func azureDeployment(p *config.Provider, d provider.Deployment) (provider.Deployment, *http.Transport, error) {
	d.BaseURL = strings.TrimRight(p.BaseURL, "/")
	if d.APIVersion == "" && !azure.IsV1(d.BaseURL) {
		d.APIVersion = config.DefaultAzureAPIVersion
	}
	d.Adapter = azure.Adapter{}
	t := provider.NewTransport()
	d.Client = &http.Client{Transport: t}
	return d, t, nil
}
