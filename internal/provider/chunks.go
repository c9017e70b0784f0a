package provider

import (
	"fmt"
	"io"
	"net/http"

	"gatehouse/internal/llm"
)

// ChunkStream is an llm.Stream for translating adapters: the adapter's
// Decode reads one provider event and emits the OpenAI chunks it becomes
// (zero, one or several), and ChunkStream queues and encodes them. It
// keeps the plumbing — buffering, encoding, closing, usage marking — out
// of every adapter.
type ChunkStream struct {
	// Body is closed by Close.
	Body io.Closer
	// Decode reads the next provider event and calls emit for each chunk
	// it produces. It returns io.EOF after the provider's last event and
	// any other error when the stream broke.
	Decode func(emit func(*llm.ChatChunk)) error

	queue []llm.ChatChunk
	done  error
}

// Next returns the next encoded chunk.
func (s *ChunkStream) Next() (llm.Chunk, error) {
	for len(s.queue) == 0 {
		if s.done != nil {
			return llm.Chunk{}, s.done
		}
		if err := s.Decode(s.emit); err != nil {
			s.done = err
		}
	}
	ch := s.queue[0]
	s.queue = s.queue[1:]
	return llm.EncodeChunk(&ch)
}

// Pending reports whether translated chunks are queued.
func (s *ChunkStream) Pending() bool { return len(s.queue) > 0 }

func (s *ChunkStream) emit(ch *llm.ChatChunk) { s.queue = append(s.queue, *ch) }

// Close closes the body.
func (s *ChunkStream) Close() error {
	if s.Body == nil {
		return nil
	}
	return s.Body.Close()
}

// ProtocolError reports a provider response the gateway cannot read: a
// malformed event, a body that is not the documented shape. It is a 502.
func ProtocolError(provider, what string, cause error) *llm.Error {
	return &llm.Error{Kind: llm.KindUpstreamProtocol, Status: http.StatusBadGateway, Type: "server_error",
		Code: "upstream_error", Message: fmt.Sprintf("provider %q sent %s", provider, what), Cause: cause}
}

// Unsupported is the 400 for a request parameter the deployment's
// provider cannot honour. Adapters return it unless the provider is
// configured with drop_unsupported, in which case they drop the parameter.
func Unsupported(d *Deployment, param string) *llm.Error {
	return llm.BadRequest(param, "unsupported_parameter",
		"Unsupported parameter: '%s' is not supported by provider %q (type %s). Remove it, or set drop_unsupported: true on the provider to have gatehouse drop it.",
		param, d.Provider, d.Type)
}
