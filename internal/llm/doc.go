// Package llm holds gatehouse's canonical, OpenAI-shaped view of a model
// call: the scanned chat and embeddings requests, token usage, stream
// chunks, gateway errors, and the SSE codec.
//
// Requests stay as the client's raw JSON plus the few fields the gateway
// needs (model, stream flag, output cap, user); the body is rewritten with
// targeted splices rather than decoded and re-encoded, so a pass-through
// call costs one scan and at most one copy.
//
// llm imports nothing of gatehouse and nothing outside the standard
// library: every other package may depend on it.
package llm
