package provider

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
)

const notTLS = "it does not speak TLS (check the scheme of its base_url)"

// tlsFailure says, in words safe to show a client, why err is a failed
// TLS handshake with the provider, or "" when it is not one. The
// certificate's details stay in the error's cause, for the log.
func tlsFailure(err error) string {
	var (
		verify    *tls.CertificateVerificationError
		authority x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		ech       *tls.ECHRejectionError
		op        *net.OpError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &authority), errors.As(err, &host), errors.As(err, &invalid):
		return "its TLS certificate is not trusted"
	case errors.As(err, &record):
		return notTLS
	case errors.As(err, &op) && op.Op == "remote error":
		return "it refused the TLS handshake"
	case errors.As(err, &ech):
		return "the TLS handshake failed"
	}
	// net/http turns a plain HTTP answer to the ClientHello into an
	// error of its own, and the handshake's other failures (no common
	// version or cipher, a malformed message) are plain errors worded
	// "tls: …": neither has a type to look for.
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch msg := e.Error(); {
		case msg == "http: server gave HTTP response to HTTPS client":
			return notTLS
		case strings.HasPrefix(msg, "tls: "):
			return "the TLS handshake failed"
		}
	}
	return ""
}
