package ollama

import "gatehouse/internal/provider"

// Type is the "ollama" provider type. base_url is the server's root
// (default DefaultBaseURL), not its /v1 path. Ollama is a server of one's
// own, so it is priced as local, and its pulled models are discovered
// unless the config says `discover: false`.
func Type() provider.Type {
	return provider.Type{
		Name:              "ollama",
		Options:           []provider.Option{provider.OptionDiscover},
		DiscoverByDefault: true,
		New: func(s provider.Settings, d *provider.Deployment) error {
			d.BaseURL = provider.BaseURLOr(s.BaseURL, DefaultBaseURL)
			d.LocalPricing = true
			d.Adapter = Adapter{}
			return nil
		},
	}
}
