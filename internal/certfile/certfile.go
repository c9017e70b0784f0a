// Package certfile serves a TLS certificate from a certificate file and a
// key file, and picks up new ones when the files change, so a renewed
// certificate (certbot, cert-manager, a rotated secret) is used by new
// connections without a restart.
//
// It imports only the standard library.
package certfile

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// Source is a key pair read from two files. Its GetCertificate checks the
// files' size and modification time at every handshake (two stat calls,
// small next to a handshake) and reads them again when either changed.
type Source struct {
	certFile, keyFile string
	// OnError, when set, is told of a changed pair that cannot be used
	// (a half-written renewal, say), once per change; the last good
	// certificate is served meanwhile. Set it before serving.
	OnError func(error)

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   stamp // of the files cert was read from
	refused stamp // of the last pair that failed to load, not reported again
}

// stamp tells file versions apart.
type stamp struct {
	certSize, keySize int64
	certTime, keyTime time.Time
}

// Load reads the pair once; an error means the files cannot serve.
func Load(certFile, keyFile string) (*Source, error) {
	s := &Source{certFile: certFile, keyFile: keyFile}
	st, err := s.stat()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s with key %s: %w", certFile, keyFile, err)
	}
	s.cert, s.stamp = &cert, st
	return s, nil
}

func (s *Source) stat() (stamp, error) {
	c, err := os.Stat(s.certFile)
	if err != nil {
		return stamp{}, err
	}
	k, err := os.Stat(s.keyFile)
	if err != nil {
		return stamp{}, err
	}
	return stamp{certSize: c.Size(), keySize: k.Size(), certTime: c.ModTime(), keyTime: k.ModTime()}, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (s *Source) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.stat()
	if err != nil || st == s.stamp || st == s.refused {
		return s.cert, nil // files gone for a moment (being replaced): keep serving
	}
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		s.refused = st
		if s.OnError != nil {
			s.OnError(fmt.Errorf("TLS certificate %s changed but cannot be used; serving the previous one: %w", s.certFile, err))
		}
		return s.cert, nil
	}
	s.cert, s.stamp = &cert, st
	return s.cert, nil
}

// Config is a server TLS config serving s, offering HTTP/2 and HTTP/1.1.
func (s *Source) Config() *tls.Config {
	return &tls.Config{GetCertificate: s.GetCertificate, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
}
