package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// apiError is Google's error body: {"error":{"code","message","status",
// "details":[…]}}. A 429's details may hold a google.rpc.RetryInfo whose
// retryDelay says when to come back.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		RetryDelay string `json:"retryDelay"`
	} `json:"details"`
}

// Error decodes Gemini's error body, keeping the status, the message and
// the gRPC status name (as the error code), and the wait a 429 asks for:
// Retry-After if the response has one, else RetryInfo's retryDelay.
func (Adapter) Error(resp *http.Response, d *provider.Deployment) *llm.Error {
	body, _ := provider.ReadBody(resp, 1<<20)
	if e := decodeError(body); e != nil && e.Message != "" {
		return e.gatewayError(d.Provider, resp.StatusCode, resp.Header)
	}
	return provider.StatusError(d.Provider, resp, body)
}

// decodeError reads an error body; Gemini wraps it in an array when a
// stream is not SSE, so both forms are accepted.
func decodeError(body []byte) *apiError {
	body = bytes.TrimSpace(body)
	var w struct {
		Error *apiError `json:"error"`
	}
	if llm.KindOf(body) == llm.KindArray {
		var ws []json.RawMessage
		if json.Unmarshal(body, &ws) != nil || len(ws) == 0 {
			return nil
		}
		body = ws[0]
	}
	if json.Unmarshal(body, &w) != nil {
		return nil
	}
	return w.Error
}

// gatewayError builds the gateway's error. status is the HTTP status, or
// for an error event inside a stream the status to fall back on when the
// body has no code.
func (e *apiError) gatewayError(name string, status int, h http.Header) *llm.Error {
	if status < 400 {
		status = http.StatusBadGateway
		if e.Code >= 400 && e.Code <= 599 {
			status = e.Code
		}
	}
	ge := &llm.Error{Kind: llm.KindUpstreamStatus, Status: status, Message: e.Message, Type: llm.DefaultErrorType(status), Code: e.Status}
	if e.Message == "" {
		ge.Message = "provider " + name + " answered " + http.StatusText(status)
	}
	if h != nil {
		ge.RetryAfter = provider.RetryAfter(h, time.Now())
	}
	if ge.RetryAfter == 0 {
		for _, dt := range e.Details {
			if strings.HasSuffix(dt.Type, "google.rpc.RetryInfo") {
				if d, err := time.ParseDuration(dt.RetryDelay); err == nil && d > 0 {
					ge.RetryAfter = d
				}
			}
		}
	}
	ge.Cause = fmt.Errorf("provider %q status %d %s", name, status, e.Status)
	return ge
}
