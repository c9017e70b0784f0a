package auth

import "sync/atomic"

// ConnMemo remembers, for one client connection, the last secret that
// resolved on it and the secret's SHA-256, so that the connection's next
// request with that secret takes its hash by comparing the secret with
// the remembered one instead of computing HashMemo's SipHash and reading
// its map: a client's requests come over keep-alive connections, and a
// connection nearly always carries one key (about 380 fewer
// instructions a request under callgrind; BENCHMARKS.md, "The key's
// hash, per connection").
//
// The comparison takes the same time whatever the bytes (sameSecret), so
// its timing tells nobody how much of a guess was right. A connection
// that carries many keys (behind a shared proxy) loses nothing but the
// comparison on a change of key: the secret then goes through HashMemo
// as it would without this. The entry gives way to another secret that
// resolved only after connMissesToReplace such misses, so that keys in
// turn do not make a new entry (an allocation) on every request. A
// request is never answered with another secret's hash: the entry is
// used only for the very bytes it was made from.
//
// The plaintext secret is kept as long as the connection is: it is the
// request header's own string (which the connection's read buffer held
// anyway), and the ConnMemo must be held by the connection alone (the
// gateway attaches it to the connection's context), so that it goes
// when the connection closes. A secret the resolver refuses is dropped
// at once.
//
// Nothing here decides who is let in: every request still resolves the
// hash through the resolver, so revocation, expiry and rotation take
// effect on a connection's next request, exactly as they do without it.
// Safe for concurrent use (HTTP/2 carries a connection's requests at the
// same time): the entry is immutable, swapped whole. The zero value is
// an empty memo; a nil *ConnMemo remembers nothing.
type ConnMemo struct {
	last atomic.Pointer[connSecret]
}

// connSecret is a secret that resolved and its SHA-256, never modified,
// and how many other secrets that resolved missed it.
type connSecret struct {
	secret string
	hash   Hash
	misses atomic.Uint32
}

// connMissesToReplace is how many requests with other secrets that
// resolve a connection's entry sees before the next one replaces it: a
// connection whose client changed its key for good has the new one
// remembered by its ninth request, and one that carries keys in turn
// (a shared proxy's) makes one 64-byte entry every eight misses
// rather than one a request (BenchmarkResolveOn/alternating).
const connMissesToReplace = 8

// lookup returns the remembered entry when secret is its secret, else
// nil (and nil for a nil memo).
func (c *ConnMemo) lookup(secret string) *connSecret {
	if c == nil {
		return nil
	}
	if e := c.last.Load(); e != nil && sameSecret(e.secret, secret) {
		return e
	}
	return nil
}

// remember makes secret, which resolved by hash h and is not the
// connection's entry, the entry when there is none or the entry has
// been missed connMissesToReplace times.
func (c *ConnMemo) remember(secret string, h Hash) {
	if c == nil {
		return
	}
	if e := c.last.Load(); e != nil && e.misses.Add(1) < connMissesToReplace {
		return
	}
	c.last.Store(&connSecret{secret: secret, hash: h})
}

// forget drops e, unless another request has replaced it already.
func (c *ConnMemo) forget(e *connSecret) {
	c.last.CompareAndSwap(e, nil)
}

// sameSecret reports whether a and b are the same bytes, in a time that
// depends on their length only: eight bytes at a time, every word
// compared, no branch on their contents and no early exit. (The length
// is compared first; a key format fixes it, so it tells nothing.)
func sameSecret(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var diff uint64
	i := 0
	for ; i+8 <= len(a); i += 8 {
		diff |= word(a[i:i+8]) ^ word(b[i:i+8])
	}
	for ; i < len(a); i++ {
		diff |= uint64(a[i] ^ b[i])
	}
	return diff == 0
}

// word is s's first eight bytes as one little-endian number (which the
// compiler makes a single load).
func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
