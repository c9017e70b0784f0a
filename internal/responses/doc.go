// Package responses is OpenAI's Responses API (POST /v1/responses) in
// front of any backend. A request is decoded into the canonical chat
// request (llm.ChatParams), so every adapter serves it with the
// translation it already has; the OpenAI-shaped answer is re-expressed as
// a response object or as the Responses event stream, each event numbered.
// Backends that speak the Responses API themselves (OpenAI, Azure) are
// sent the client's body instead; see the server for that choice.
//
// It also declares Store, where responses created with store: true are
// kept so previous_response_id and GET/DELETE /v1/responses/{id} work.
//
// Like the Messages dialect it imports only llm: translation does no I/O,
// so it is tested from wire fixtures.
package responses
