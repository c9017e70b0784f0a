package mockllm

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4, verified the way the AWS documentation
// ("Create a signed AWS API request") describes it, with nothing but
// crypto/hmac and crypto/sha256. It is deliberately a second, independent
// implementation: the gateway signs with the AWS SDK's signer, and only a
// verifier that shares no code with it can show the signature is right.

const (
	sigV4Algorithm = "AWS4-HMAC-SHA256"
	amzDateFormat  = "20060102T150405Z"
	// sigV4Skew is how far a request's X-Amz-Date may be from the
	// server's clock.
	sigV4Skew = 5 * time.Minute
)

func bedrockAuthError(status int, typ, message string) *bedrockError {
	return &bedrockError{status: status, typ: typ, message: message}
}

var (
	errMissingAuth    = bedrockAuthError(http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
	errSignature      = bedrockAuthError(http.StatusForbidden, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	errUnknownAccess  = bedrockAuthError(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
	errIncomplete     = bedrockAuthError(http.StatusBadRequest, "IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.")
	errBadBedrockKey  = bedrockAuthError(http.StatusForbidden, "AccessDeniedException", "Authentication failed: Please make sure your API Key is valid.")
	errWrongService   = bedrockAuthError(http.StatusForbidden, "InvalidSignatureException", "Credential should be scoped to correct service: 'bedrock'.")
	errPayloadHash    = bedrockAuthError(http.StatusBadRequest, "InvalidSignatureException", "The provided 'x-amz-content-sha256' header does not match what was computed.")
	errUnsignedHeader = bedrockAuthError(http.StatusForbidden, "InvalidSignatureException", "'Host' and 'X-Amz-Date' must be signed, and so must every x-amz-* header sent.")
)

// bedrockAuth checks r's credentials: a bearer Bedrock API key, or a
// SigV4 signature by the configured key pair. With neither configured,
// anything goes.
func (s *Server) bedrockAuth(r *http.Request, body []byte, now time.Time) *bedrockError {
	o := &s.opts
	if o.AWSAccessKeyID == "" && o.BedrockAPIKey == "" {
		return nil
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return errMissingAuth
	}
	if token, ok := strings.CutPrefix(auth, "Bearer "); ok {
		if o.BedrockAPIKey != "" && subtle.ConstantTimeCompare([]byte(token), []byte(o.BedrockAPIKey)) == 1 {
			return nil
		}
		return errBadBedrockKey
	}
	if o.AWSAccessKeyID == "" {
		return errBadBedrockKey
	}
	return verifySigV4(r, body, now, o.AWSAccessKeyID, o.AWSSecretKey, o.AWSSessionToken)
}

// sigV4Auth is a parsed Authorization header.
type sigV4Auth struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

func parseSigV4(auth string) (*sigV4Auth, bool) {
	algo, rest, ok := strings.Cut(auth, " ")
	if !ok || algo != sigV4Algorithm {
		return nil, false
	}
	var a sigV4Auth
	var cred, signed string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			a.signature = v
		}
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || signed == "" || a.signature == "" {
		return nil, false
	}
	a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	a.signedHeaders = strings.Split(signed, ";")
	return &a, true
}

func verifySigV4(r *http.Request, body []byte, now time.Time, accessKey, secret, sessionToken string) *bedrockError {
	a, ok := parseSigV4(r.Header.Get("Authorization"))
	if !ok {
		return errIncomplete
	}
	if a.accessKey != accessKey {
		return errUnknownAccess
	}
	if a.service != "bedrock" {
		return errWrongService
	}
	amzDate := r.Header.Get("X-Amz-Date")
	at, err := time.Parse(amzDateFormat, amzDate)
	if err != nil || !strings.HasPrefix(amzDate, a.date) {
		return errSignature
	}
	if d := now.Sub(at); d > sigV4Skew || d < -sigV4Skew {
		return bedrockAuthError(http.StatusForbidden, "InvalidSignatureException",
			"Signature expired: "+amzDate+" is now earlier than "+now.Add(-sigV4Skew).UTC().Format(amzDateFormat)+" ("+now.UTC().Format(amzDateFormat)+" - 5 min.)")
	}
	if sessionToken != "" && r.Header.Get("X-Amz-Security-Token") != sessionToken {
		return errUnknownAccess
	}
	signed := map[string]bool{}
	for _, h := range a.signedHeaders {
		signed[h] = true
	}
	if !signed["host"] || !signed["x-amz-date"] {
		return errUnsignedHeader
	}
	for name := range r.Header {
		if l := strings.ToLower(name); strings.HasPrefix(l, "x-amz-") && !signed[l] {
			return errUnsignedHeader
		}
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		return errPayloadHash
	}
	canonical := strings.Join([]string{
		r.Method,
		uriEncode(r.URL.EscapedPath(), false),
		canonicalQuery(r.URL.RawQuery),
		canonicalHeaders(r, a.signedHeaders),
		strings.Join(a.signedHeaders, ";"),
		payloadHash,
	}, "\n")
	creq := sha256.Sum256([]byte(canonical))
	scope := a.date + "/" + a.region + "/" + a.service + "/aws4_request"
	toSign := sigV4Algorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(creq[:])
	key := hmacSHA256([]byte("AWS4"+secret), a.date)
	key = hmacSHA256(key, a.region)
	key = hmacSHA256(key, a.service)
	key = hmacSHA256(key, "aws4_request")
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(a.signature)) {
		return errSignature
	}
	return nil
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// uriEncode percent-encodes every byte except the unreserved characters
// A-Z a-z 0-9 - . _ ~ (and "/" unless encodeSlash), in upper-case hex.
// Applied to the already-escaped path it yields the double encoding SigV4
// asks for on every service but S3.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || (c == '/' && !encodeSlash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xf])
	}
	return b.String()
}

// canonicalQuery sorts the parameters by name and value, each encoded.
func canonicalQuery(raw string) string {
	values, _ := url.ParseQuery(raw)
	var pairs []string
	for k, vs := range values {
		for _, v := range vs {
			pairs = append(pairs, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

// canonicalHeaders lists the signed headers as "name:value\n", values
// trimmed with inner runs of spaces collapsed, repeated headers joined
// by commas.
func canonicalHeaders(r *http.Request, names []string) string {
	var b strings.Builder
	for _, name := range names {
		var values []string
		switch name {
		case "host":
			values = []string{r.Host}
		case "content-length":
			values = r.Header.Values("Content-Length")
			if len(values) == 0 {
				values = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		default:
			values = r.Header.Values(name)
		}
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range values {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strings.Join(strings.Fields(v), " "))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
