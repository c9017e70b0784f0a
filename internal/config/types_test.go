package config

import (
	"gatehouse/internal/provider"
	"gatehouse/internal/provider/anthropic"
	"gatehouse/internal/provider/azure"
	"gatehouse/internal/provider/bedrock"
	"gatehouse/internal/provider/demo"
	"gatehouse/internal/provider/gemini"
	"gatehouse/internal/provider/ollama"
	"gatehouse/internal/provider/openai"
)

// testTypes is the registry the config tests validate against: the
// gateway's own provider types, so the messages tested are the ones users
// see (cmd/gatehouse's providerTypes registers the same).
func testTypes() *provider.Registry {
	r := &provider.Registry{}
	for _, t := range []provider.Type{openai.Type(), openai.CompatibleType(), anthropic.Type(), gemini.Type(),
		ollama.Type(), azure.Type(), bedrock.Type(), demo.Type()} {
		r.Register(t)
	}
	return r
}
