// Package messages is the Anthropic Messages dialect of the gateway's
// inbound API (POST /v1/messages and /v1/messages/count_tokens): it
// decodes an Anthropic request into the canonical llm.ChatParams, and
// re-expresses the OpenAI-shaped answer of whatever backend served it —
// a chat.completion body or a stream of chunks — as an Anthropic message
// or Anthropic's exact event sequence. Errors are written in Anthropic's
// {"type":"error","error":{…}} shape.
//
// It does no I/O, so every translation is tested from wire fixtures. It
// imports only llm (and the standard library); the server wires it in.
package messages
