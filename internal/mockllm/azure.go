package mockllm

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"gatehouse/internal/llm"
)

// The Azure OpenAI dialect. Azure serves OpenAI's bodies under its own
// paths — /openai/deployments/{deployment}/chat/completions?api-version=…
// (the classic API) and /openai/v1/chat/completions (the v1 API, model in
// the body, no dated api-version) — and takes the key in an "api-key"
// header. The Responses API has no deployment in its classic path,
// /openai/responses?api-version=…: the deployment is the body's model. Once the path, version and key check out, the request is
// answered exactly as the OpenAI emulator answers it.
var azureDialect = dialect{
	name:  "azure",
	match: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/openai/") },
	serve: (*Server).serveAzure,
}

// azureAPIVersion is the shape of Azure's dated versions:
// 2024-10-21, 2025-04-01-preview.
var azureAPIVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)

// Azure's error bodies: {"error":{"code":…,"message":…}}.
var (
	errAzureAccessDenied = &apiError{status: http.StatusUnauthorized, code: "401",
		message: "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}
	errAzureNotFound    = &apiError{status: http.StatusNotFound, code: "404", message: "Resource not found"}
	errAzureV1Versioned = &apiError{status: http.StatusBadRequest, code: "BadRequest",
		message: "api-version query parameter is not allowed when using /v1 path"}
)

func (s *Server) serveAzure(c *call, body []byte) {
	r := c.r
	if s.opts.APIKey != "" && r.Header.Get("Api-Key") != s.opts.APIKey {
		c.failAzure(errAzureAccessDenied)
		return
	}
	if r.Method != http.MethodPost {
		c.failAzure(errAzureNotFound)
		return
	}
	version := r.URL.Query().Get("api-version")
	if op, ok := strings.CutPrefix(r.URL.Path, "/openai/v1/"); ok {
		if version != "" && version != "preview" && version != "latest" {
			c.failAzure(errAzureV1Versioned)
			return
		}
		if op == "responses" {
			s.responses(c, body)
			return
		}
		s.azureOperation(c, op, body)
		return
	}
	if r.URL.Path == "/openai/responses" {
		if !azureAPIVersion.MatchString(version) {
			c.failAzure(errAzureNotFound)
			return
		}
		s.responses(c, body)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/openai/deployments/")
	deployment, op, _ := strings.Cut(rest, "/")
	if !ok || deployment == "" || !azureAPIVersion.MatchString(version) {
		c.failAzure(errAzureNotFound)
		return
	}
	// The classic API takes the deployment from the path; "model" in the
	// body is optional, so the emulator fills it in when it is missing.
	var probe struct {
		Model *string `json:"model"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Model == nil && len(body) > 0 && body[0] == '{' {
		body = append(append([]byte(`{"model":`), llm.AppendQuote(nil, deployment)...), append([]byte{','}, body[1:]...)...)
		if len(body) > 2 && string(body[len(body)-2:]) == ",}" {
			body = append(body[:len(body)-2], '}')
		}
	}
	s.azureOperation(c, op, body)
}

func (s *Server) azureOperation(c *call, op string, body []byte) {
	switch op {
	case "chat/completions":
		s.chat(c, body)
	case "embeddings":
		s.embeddings(c, body)
	default:
		c.failAzure(errAzureNotFound)
	}
}

// failAzure writes Azure's error shape, which has no type or param.
func (c *call) failAzure(e *apiError) {
	b := append([]byte(`{"error":{"code":`), llm.AppendQuote(nil, e.code)...)
	b = append(b, `,"message":`...)
	b = llm.AppendQuote(b, e.message)
	c.writeJSON(e.status, append(b, "}}"...))
}
