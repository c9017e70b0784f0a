package azure

import "gatehouse/internal/provider"

// DefaultAPIVersion is the api-version of the classic deployments API
// when the config names none: the latest GA version.
const DefaultAPIVersion = "2024-10-21"

// Type is the "azure" provider type. base_url is required (each resource
// has its own); the classic deployments API gets DefaultAPIVersion when
// no api_version is configured, while the v1 API (a base_url ending in
// /openai/v1) takes none.
func Type() provider.Type {
	return provider.Type{
		Name:    "azure",
		BaseURL: provider.BaseURLRequired,
		Options: []provider.Option{provider.OptionAPIVersion, provider.OptionResponsesAPI},
		// Where the API version has it (the v1 API, 2025-03-01-preview
		// and later), Responses requests go to Azure as they are.
		ResponsesAPIByDefault: true,
		New: func(s provider.Settings, d *provider.Deployment) error {
			d.BaseURL = s.BaseURL
			if d.APIVersion == "" && !IsV1(d.BaseURL) {
				d.APIVersion = DefaultAPIVersion
			}
			d.Adapter = Adapter{}
			return nil
		},
	}
}
