package cache

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"gatehouse/internal/limit"
	"gatehouse/internal/llm"
)

// codecVersion leads every encoded entry, so a later format can tell old
// values apart (and treat them as misses) instead of misreading them.
const codecVersion = 1

// MaxEntryBytes bounds an entry's fields before deflation: Encode refuses
// a larger entry and Decode reads no further, so a corrupt or hostile
// value in a shared tier (a small deflate stream can expand a
// thousandfold) cannot make a replica allocate without bound. Four times
// a provider's default response bound (64 MiB) leaves room for a long
// stream's chunks.
const MaxEntryBytes = 256 << 20

// errTooLarge is what an entry past MaxEntryBytes gets, either way.
func errTooLarge(bound int64) error { return fmt.Errorf("cache: an entry over %d bytes", bound) }

// Encode turns e into the bytes a lower tier stores: a version byte, then
// the entry's fields length-prefixed in a fixed order, deflated (LLM
// answers compress several times over). Bytes, not JSON: a stored event
// must come back exactly as it was relayed, which a JSON round trip
// (escaping, compaction) would not promise.
func Encode(e *Entry) ([]byte, error) {
	var raw []byte
	for _, s := range [...]string{e.Project, e.ServedModel, e.Provider, e.Deployment} {
		raw = appendBytes(raw, []byte(s))
	}
	raw = binary.AppendVarint(raw, int64(e.Cost))
	raw = binary.AppendVarint(raw, e.Expires.UnixMicro())
	raw = appendUsage(raw, &e.Usage)
	if e.Completion != nil {
		raw = append(raw, 'c')
		raw = appendBytes(raw, e.Completion)
	} else {
		raw = append(raw, 's')
		raw = binary.AppendUvarint(raw, uint64(len(e.Chunks)))
		for _, c := range e.Chunks {
			raw = appendBytes(raw, c.Data)
			switch {
			case c.Usage == nil:
				raw = append(raw, 0)
			case c.UsageOnly:
				raw = append(raw, 2)
				raw = appendUsage(raw, c.Usage)
			default:
				raw = append(raw, 1)
				raw = appendUsage(raw, c.Usage)
			}
		}
	}
	if len(raw) > MaxEntryBytes {
		return nil, errTooLarge(MaxEntryBytes)
	}
	var b bytes.Buffer
	b.WriteByte(codecVersion)
	fw, _ := flate.NewWriter(&b, flate.BestSpeed)
	if _, err := fw.Write(raw); err != nil {
		return nil, err
	}
	if err := fw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode reads what Encode wrote.
func Decode(b []byte) (*Entry, error) {
	return decodeWithin(b, MaxEntryBytes)
}

// decodeWithin is Decode with the bound as a parameter, so a test can
// show the bound holds without inflating 256 MiB.
func decodeWithin(b []byte, bound int64) (*Entry, error) {
	if len(b) == 0 || b[0] != codecVersion {
		return nil, errors.New("cache: an entry of an unknown format")
	}
	raw, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(b[1:])), bound+1))
	if err != nil {
		return nil, fmt.Errorf("cache: entry: %w", err)
	}
	if int64(len(raw)) > bound {
		return nil, errTooLarge(bound)
	}
	r := reader{b: raw}
	e := &Entry{Project: string(r.bytes()), ServedModel: string(r.bytes()), Provider: string(r.bytes()),
		Deployment: string(r.bytes())}
	e.Cost = limit.Micros(r.varint())
	e.Expires = time.UnixMicro(r.varint())
	r.usage(&e.Usage)
	switch r.byte() {
	case 'c':
		e.Completion = r.bytes()
	case 's':
		n := r.uvarint()
		if n > uint64(len(raw)) {
			return nil, errors.New("cache: entry: corrupt chunk count")
		}
		e.Chunks = make([]llm.Chunk, 0, n)
		for range n {
			c := llm.Chunk{Data: r.bytes()}
			switch r.byte() {
			case 1:
				c.Usage = &llm.Usage{}
				r.usage(c.Usage)
			case 2:
				c.Usage, c.UsageOnly = &llm.Usage{}, true
				r.usage(c.Usage)
			}
			e.Chunks = append(e.Chunks, c)
		}
	default:
		r.err = true
	}
	if r.err || r.off != len(raw) {
		return nil, errors.New("cache: entry: corrupt")
	}
	return e, nil
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendUsage(b []byte, u *llm.Usage) []byte {
	for _, n := range [...]int{u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.CachedTokens, u.ReasoningTokens} {
		b = binary.AppendVarint(b, int64(n))
	}
	return b
}

// reader reads Encode's fields; a short or malformed input sets err and
// yields zero values from then on.
type reader struct {
	b   []byte
	off int
	err bool
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.err = true
		return 0
	}
	r.off += n
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.err = true
		return 0
	}
	r.off += n
	return v
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.err = true
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err || n > uint64(len(r.b)-r.off) {
		r.err = true
		return nil
	}
	s := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return s
}

func (r *reader) usage(u *llm.Usage) {
	for _, p := range [...]*int{&u.PromptTokens, &u.CompletionTokens, &u.TotalTokens, &u.CachedTokens, &u.ReasoningTokens} {
		*p = int(r.varint())
	}
}
