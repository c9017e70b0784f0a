package route

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// Retry bounds the attempts of one request. The zero value uses the
// defaults below.
type Retry struct {
	// MaxAttempts caps the upstream calls of one request, fallbacks
	// included; 0 allows every deployment of the model and of its
	// fallbacks once, plus one retry.
	MaxAttempts int
	// Backoff is the wait before the first retry of a deployment already
	// tried; it doubles with each round, with ±50% jitter. 0 means
	// DefaultBackoff.
	Backoff time.Duration
	// MaxBackoff caps every wait, Retry-After included: an upstream that
	// asks for a longer pause is not waited for (the request moves on,
	// or the client gets the 429 and its Retry-After). 0 means
	// DefaultMaxBackoff.
	MaxBackoff time.Duration
	// RetryOn lists further upstream statuses (such as 404 or 408) that
	// move on to another deployment; connection errors, timeouts before
	// the first byte, 429 and 5xx always do.
	RetryOn []int
}

// Retry defaults.
const (
	DefaultBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

func (r Retry) backoff(round int, rnd func() float64) time.Duration {
	base, ceiling := r.Backoff, r.MaxBackoff
	if base <= 0 {
		base = DefaultBackoff
	}
	if ceiling <= 0 {
		ceiling = DefaultMaxBackoff
	}
	d := base
	for i := 1; i < round && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return time.Duration(float64(d) * (0.5 + rnd()))
}

func (r Retry) maxWait() time.Duration {
	if r.MaxBackoff <= 0 {
		return DefaultMaxBackoff
	}
	return r.MaxBackoff
}

// verdict is what an attempt's error means for the request.
type verdict uint8

const (
	moveOn     verdict = iota // another deployment may answer
	notHere                   // another deployment may answer; this one would fail the same way again
	fatal                     // answer the client with this error
	tooLong                   // the prompt does not fit: context fallbacks
	clientGone                // stop at once
)

func (r Retry) judge(e *llm.Error) verdict {
	switch e.Kind {
	case llm.KindCanceled:
		return clientGone
	case llm.KindUpstreamProtocol:
		if e.Code == provider.CodeResponseTooLarge {
			return notHere // the same call here would come back just as large
		}
		return moveOn
	case llm.KindUpstreamConnect, llm.KindUpstreamTimeout, llm.KindUpstreamTLS:
		return moveOn
	case llm.KindUpstreamStatus:
		switch {
		case ContextTooLong(e):
			return tooLong
		case e.Status == http.StatusTooManyRequests, e.Status >= 500, slices.Contains(r.RetryOn, e.Status):
			return moveOn
		}
	}
	return fatal
}

// health is what an attempt's error says about the deployment.
func (r Retry) health(e *llm.Error) Outcome {
	if e == nil {
		return Success
	}
	switch r.judge(e) {
	case moveOn, notHere:
		return Failure
	case fatal, tooLong:
		if e.Kind == llm.KindUpstreamStatus {
			return Success // it answered properly; the request was at fault
		}
	}
	return Neutral
}

// ContextTooLong reports whether an upstream refused a request because
// the prompt does not fit the model's context window. Providers word it
// differently: OpenAI's code context_length_exceeded ("maximum context
// length"), Anthropic's "prompt is too long", Gemini's "input token count
// … exceeds the maximum", Bedrock's "Input is too long", llama.cpp's
// exceed_context_size_error and vLLM/Ollama's context length messages.
func ContextTooLong(e *llm.Error) bool {
	if e == nil || e.Kind != llm.KindUpstreamStatus || e.Status < 400 || e.Status >= 500 || e.Status == http.StatusTooManyRequests {
		return false
	}
	switch e.Code {
	case "context_length_exceeded", "exceed_context_size_error", "string_above_max_length":
		return true
	}
	m := strings.ToLower(e.Message)
	for _, s := range []string{"prompt is too long", "maximum context length", "context length exceeded",
		"exceeds the context", "exceeds the maximum number of tokens", "input is too long", "context window",
		"exceed_context_size"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// contextError is the answer when the estimate alone shows the prompt does
// not fit and no fallback takes it.
func contextError(model string, prompt, window int) *llm.Error {
	return &llm.Error{Kind: llm.KindBadRequest, Status: http.StatusBadRequest, Type: "invalid_request_error",
		Code: "context_length_exceeded", Param: "messages",
		Message: "This model's maximum context length is " + itoa(window) + " tokens; the request needs about " +
			itoa(prompt) + " (model '" + model + "')."}
}

func noDeployment(model string) *llm.Error {
	return &llm.Error{Kind: llm.KindUnavailable, Status: http.StatusServiceUnavailable, Type: "server_error",
		Code: "no_deployment_available", Message: "No deployment of the model '" + model + "' can take the request now."}
}
