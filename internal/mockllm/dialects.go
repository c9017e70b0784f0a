package mockllm

import "net/http"

// dialect is one provider wire format besides OpenAI's. It claims the
// requests addressed to its paths and answers them, checking credentials
// the way that provider does; the shared machinery (reply text, token
// pacing, @mock directives, injected failures, recording and cancellation)
// is the same for every dialect.
type dialect struct {
	name  string
	match func(r *http.Request) bool
	serve func(s *Server, c *call, body []byte)
}

// dialects lists the non-OpenAI wire formats, each in its own file. A
// request no dialect claims is an OpenAI request.
var dialects = []dialect{
	azureDialect,
	ollamaDialect,
	anthropicDialect,
	geminiDialect,
	bedrockDialect,
}

// dialectFor returns the dialect that claims r, or nil.
func dialectFor(r *http.Request) *dialect {
	for i := range dialects {
		if dialects[i].match(r) {
			return &dialects[i]
		}
	}
	return nil
}
