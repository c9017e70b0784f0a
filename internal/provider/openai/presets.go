package openai

// PresetBaseURL returns the default base URL of a named OpenAI-compatible
// service, so a config can say `preset: groq` instead of spelling it out.
func PresetBaseURL(preset string) (string, bool) {
	switch preset {
	case "openai":
		return "https://api.openai.com/v1", true
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
