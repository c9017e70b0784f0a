// Package bedrock adapts Amazon Bedrock's Converse API: POST
// /model/{modelId}/converse and /model/{modelId}/converse-stream on
// bedrock-runtime.{region}.amazonaws.com. It translates the OpenAI
// request into Converse's messages/system/toolConfig/inferenceConfig,
// signs it with SigV4 (or sends a Bedrock API key as a bearer token), and
// translates the answer back, decoding ConverseStream's binary AWS
// event-stream framing into OpenAI chunks.
//
// Credentials and region are resolved once, when the config is loaded,
// and handed to the Adapter: it reads no environment, does no I/O, and
// signing is pure computation over the request it builds.
//
// It imports only provider and llm of gatehouse, plus the AWS SDK's
// signer and event-stream decoder.
package bedrock

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"gatehouse/internal/llm"
	"gatehouse/internal/provider"
)

// signingService is the SigV4 service name of bedrock-runtime.
const signingService = "bedrock"

// Adapter is the Bedrock Converse adapter. Requests are authenticated
// with BearerToken when set, else with the deployment's APIKey as a
// bearer token when set, else signed with Credentials.
type Adapter struct {
	// Credentials are the AWS access key, secret and optional session
	// token requests are signed with.
	Credentials aws.Credentials
	// BearerToken is a Bedrock API key (AWS_BEARER_TOKEN_BEDROCK), sent
	// as "Authorization: Bearer …" instead of a signature.
	BearerToken string
	// Now is the signing clock; nil means time.Now.
	Now func() time.Time
	// Signer signs requests; nil means a new v4 signer per request. Share
	// one to reuse its derived-key cache.
	Signer *v4.Signer
}

var _ provider.Adapter = (*Adapter)(nil)

// Endpoint returns the base URL for a region: the public bedrock-runtime
// endpoint.
func Endpoint(region string) string {
	return "https://bedrock-runtime." + region + ".amazonaws.com"
}

// ChatRequest translates req into a Converse (or ConverseStream) request
// and signs it.
func (a *Adapter) ChatRequest(ctx context.Context, d *provider.Deployment, req *llm.ChatRequest) (*http.Request, error) {
	p, err := req.Params()
	if err != nil {
		return nil, err
	}
	cr, err := translate(d, p)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(cr)
	if err != nil {
		return nil, fmt.Errorf("provider %q: encode converse request: %w", d.Provider, err)
	}
	op, accept := "/converse", "application/json"
	if req.Stream {
		op, accept = "/converse-stream", "application/vnd.amazon.eventstream"
	}
	base := d.BaseURL
	if base == "" {
		base = Endpoint(d.Region)
	}
	// The model id goes in the path escaped the way the AWS SDKs escape
	// it (every byte but A-Z a-z 0-9 - . _ ~), so ids with ":" and
	// inference-profile ARNs with "/" stay one segment.
	u, err := url.Parse(strings.TrimRight(base, "/") + "/model/" + escapeSegment(d.Model) + op)
	if err != nil {
		return nil, fmt.Errorf("provider %q: build request URL: %w", d.Provider, err)
	}
	r, err := provider.NewRequest(ctx, d, http.MethodPost, u.String(), body, accept)
	if err != nil {
		return nil, err
	}
	if err := a.authenticate(ctx, d, r, body); err != nil {
		return nil, err
	}
	return r, nil
}

// token is the bearer token d's requests carry: BearerToken, else the
// deployment's APIKey; "" when they are signed instead.
func (a *Adapter) token(d *provider.Deployment) string {
	if a.BearerToken != "" {
		return a.BearerToken
	}
	return d.APIKey
}

// redact hides the bearer token in a message from Bedrock, which reaches
// the client: a server or a proxy in front of it that echoes the
// Authorization header back must not hand the token to every caller.
func redact(msg, token string) string {
	if token == "" {
		return msg
	}
	return strings.ReplaceAll(msg, token, "[redacted]")
}

// authenticate adds the bearer token or the SigV4 signature. The payload
// hash is sent as X-Amz-Content-Sha256 and signed with the rest.
func (a *Adapter) authenticate(ctx context.Context, d *provider.Deployment, r *http.Request, body []byte) error {
	if token := a.token(d); token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
	if a.Credentials.AccessKeyID == "" || a.Credentials.SecretAccessKey == "" {
		return &llm.Error{Kind: llm.KindInternal, Status: http.StatusInternalServerError, Type: "server_error",
			Message: fmt.Sprintf("provider %q has no AWS credentials to sign with", d.Provider)}
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	r.Header.Set("X-Amz-Content-Sha256", hash)
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	signer := a.Signer
	if signer == nil {
		signer = v4.NewSigner()
	}
	if err := signer.SignHTTP(ctx, a.Credentials, r, hash, signingService, d.Region, now()); err != nil {
		return fmt.Errorf("provider %q: sign request: %w", d.Provider, err)
	}
	return nil
}

func escapeSegment(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String()
}

// Error decodes Bedrock's error: the type in the x-amzn-ErrorType header
// ("ThrottlingException:http://…") and {"message": …} in the body. The
// status, message (the bearer token redacted) and any Retry-After are
// kept; the type becomes the code.
func (a *Adapter) Error(resp *http.Response, d *provider.Deployment) *llm.Error {
	body, _ := provider.ReadBody(resp, 1<<20)
	e := provider.StatusError(d.Provider, resp, body)
	e.Message = redact(e.Message, a.token(d))
	if t := errorType(resp.Header.Get("X-Amzn-Errortype")); t != "" {
		e.Code = t
	} else if t := jsonErrorType(body); t != "" {
		e.Code = t
	}
	return e
}

// errorType cuts the namespace off an x-amzn-ErrorType value.
func errorType(v string) string {
	t, _, _ := strings.Cut(v, ":")
	return strings.TrimSpace(t)
}

// jsonErrorType reads "__type" from a body, where some AWS front ends
// put the error type instead of the header.
func jsonErrorType(body []byte) string {
	var w struct {
		Type string `json:"__type"`
	}
	if json.Unmarshal(body, &w) != nil {
		return ""
	}
	if i := strings.LastIndexByte(w.Type, '#'); i >= 0 {
		return w.Type[i+1:]
	}
	return errorType(w.Type)
}

// completionID names a response: the upstream request id when Bedrock
// sent one, else random.
func completionID(h http.Header) string {
	if id := h.Get("X-Amzn-Requestid"); id != "" {
		return "chatcmpl-" + id
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-" + hex.EncodeToString(b[:])
}
