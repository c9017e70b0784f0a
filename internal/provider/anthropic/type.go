package anthropic

import (
	"strings"

	"gatehouse/internal/provider"
)

// Type is the "anthropic" provider type. base_url defaults to
// DefaultBaseURL; a trailing /v1 is tolerated (the adapter adds
// /v1/messages itself), since users often paste the API root.
func Type() provider.Type {
	return provider.Type{Name: "anthropic", New: func(s provider.Settings, d *provider.Deployment) error {
		base := strings.TrimRight(provider.BaseURLOr(s.BaseURL, DefaultBaseURL), "/")
		d.BaseURL = strings.TrimSuffix(base, "/v1")
		d.Adapter = Adapter{}
		return nil
	}}
}
