package gemini

import "gatehouse/internal/provider"

// Type is the "gemini" provider type: the Google AI Gemini API. base_url
// defaults to DefaultBaseURL and includes the API version; the key goes in
// the x-goog-api-key header.
func Type() provider.Type {
	return provider.Type{Name: "gemini", New: func(s provider.Settings, d *provider.Deployment) error {
		d.BaseURL = provider.BaseURLOr(s.BaseURL, DefaultBaseURL)
		d.Adapter = Adapter{}
		return nil
	}}
}
