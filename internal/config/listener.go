package config

import (
	"crypto/tls"
	"errors"
	"io/fs"
)

// TLS is server.tls: the certificate the gateway serves HTTPS with. The
// files are read again whenever they change, so a renewed certificate is
// picked up without a restart (by new connections; open ones keep theirs).
type TLS struct {
	CertFile string `yaml:"cert_file"` // PEM certificate chain, leaf first
	KeyFile  string `yaml:"key_file"`  // PEM private key of the leaf
}

// smallestHeaderLimit keeps server.max_header_bytes above what ordinary
// clients send: an SDK's request line and headers take well under 2 KiB.
const smallestHeaderLimit = 4 << 10

func (c *checker) listener(s Server) {
	if c.d.set["server.max_header_bytes"] && s.MaxHeaderBytes < smallestHeaderLimit {
		c.errorf("server.max_header_bytes", "must be at least 4KiB")
	}
	c.nonNegative("server.body_read_timeout", float64(s.BodyReadTimeout))
	c.enum("server.http1_engine", s.HTTP1Engine, []string{EngineNetHTTP, EngineGatehouse}, "HTTP/1.x engine")
	if t := s.TLS; t != nil {
		switch {
		case t.CertFile == "" && t.KeyFile == "":
			c.errorf("server.tls", "needs cert_file and key_file")
		case t.CertFile == "":
			c.errorf("server.tls.cert_file", "is required with key_file")
		case t.KeyFile == "":
			c.errorf("server.tls.key_file", "is required with cert_file")
		default:
			if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
				c.errorf("server.tls", "cannot use the certificate: %s", keyPairProblem(err))
			}
		}
	}
}

// keyPairProblem words a LoadX509KeyPair failure without the key's bytes
// (crypto/tls never puts them in its errors, but a path error is clearer
// on its own).
func keyPairProblem(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

func listenerDefaults(s *Server) {
	if s.MaxHeaderBytes == 0 {
		s.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if s.BodyReadTimeout == 0 {
		s.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if s.HTTP1Engine == "" {
		s.HTTP1Engine = EngineGatehouse
	}
}
