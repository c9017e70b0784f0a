// Package providers lists the provider types this build serves: the one
// place a new provider type is registered (docs/providers.md), read by
// the gateway's composition root and by every tool that validates a
// config as `gatehouse config check` does (the deploy files' tests).
//
// It imports the provider packages and nothing else of the gateway.
package providers

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

// Builtin returns a new registry of the built-in provider types, one
// line per type; config validation takes its list of types from it.
func Builtin() *provider.Registry {
	r := &provider.Registry{}
	r.Register(openai.Type())
	r.Register(openai.CompatibleType())
	r.Register(anthropic.Type())
	r.Register(gemini.Type())
	r.Register(ollama.Type())
	r.Register(azure.Type())
	r.Register(bedrock.Type())
	r.Register(demo.Type())
	return r
}
