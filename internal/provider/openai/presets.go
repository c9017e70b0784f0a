package openai

import (
	"errors"

	"gatehouse/internal/provider"
)

// Type is the "openai" provider type: OpenAI's own API, at its public
// address unless base_url says otherwise.
func Type() provider.Type {
	return provider.Type{
		Name:                  "openai",
		Options:               []provider.Option{provider.OptionResponsesAPI},
		ResponsesAPIByDefault: true,
		New: func(s provider.Settings, d *provider.Deployment) error {
			d.BaseURL = provider.BaseURLOr(s.BaseURL, openAIBaseURL)
			d.Adapter = Adapter{}
			return nil
		},
	}
}

// CompatibleType is the "openai-compatible" provider type: any server
// speaking OpenAI's wire format, at its base_url or at a named preset's.
// The presets that are servers one runs oneself (vLLM, LM Studio,
// llama.cpp) are priced as local: nothing per token.
func CompatibleType() provider.Type {
	return provider.Type{
		Name:    "openai-compatible",
		BaseURL: provider.BaseURLUnlessPreset,
		Presets: Presets(),
		// A server of one's own may or may not have the Responses API
		// (vLLM has it, llama.cpp not): translated unless the config
		// turns responses_api on.
		Options: []provider.Option{provider.OptionPreset, provider.OptionResponsesAPI},
		New: func(s provider.Settings, d *provider.Deployment) error {
			d.BaseURL = s.BaseURL
			if d.BaseURL == "" {
				u, ok := PresetBaseURL(s.Preset)
				if !ok {
					return errors.New("base_url is required")
				}
				d.BaseURL = u
			}
			d.LocalPricing = d.LocalPricing || localPreset(s.Preset)
			d.Adapter = Adapter{}
			return nil
		},
	}
}

// openAIBaseURL is OpenAI's public API.
const openAIBaseURL = "https://api.openai.com/v1"

// Presets are the named OpenAI-compatible services, in the order the
// README lists them.
func Presets() []string {
	return []string{"groq", "together", "deepseek", "xai", "mistral", "openrouter", "fireworks", "vllm", "lmstudio", "llama.cpp"}
}

// localPreset reports whether a preset is a server one runs oneself.
func localPreset(preset string) bool {
	return preset == "vllm" || preset == "lmstudio" || preset == "llama.cpp"
}

// PresetBaseURL returns the default base URL of a named OpenAI-compatible
// service, so a config can say `preset: groq` instead of spelling it out.
func PresetBaseURL(preset string) (string, bool) {
	switch preset {
	case "openai":
		return openAIBaseURL, true
	case "groq":
		return "https://api.groq.com/openai/v1", true
	case "together":
		return "https://api.together.xyz/v1", true
	case "deepseek":
		return "https://api.deepseek.com/v1", true
	case "xai":
		return "https://api.x.ai/v1", true
	case "mistral":
		return "https://api.mistral.ai/v1", true
	case "openrouter":
		return "https://openrouter.ai/api/v1", true
	case "fireworks":
		return "https://api.fireworks.ai/inference/v1", true
	case "vllm":
		return "http://127.0.0.1:8000/v1", true
	case "lmstudio":
		return "http://127.0.0.1:1234/v1", true
	case "llama.cpp":
		return "http://127.0.0.1:8080/v1", true
	}
	return "", false
}
