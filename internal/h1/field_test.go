package h1

import (
	"bufio"
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// byteName and byteClean are the rules one byte at a time: the word
// tests must agree with them on every string.
func byteName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !nameByte(k[i]) {
			return false
		}
	}
	return true
}

func byteClean(v string) bool {
	for i := 0; i < len(v); i++ {
		if !valueByte(v[i]) {
			return false
		}
	}
	return true
}

// TestWordChecks puts every byte value at every position of names and
// values of every length up to 40 (so each position of a word, of the
// byte tail, and a word after a refused one), among fillers that pass and
// fillers that sit at the rules' edges, and wants the word-at-a-time
// checks to say what the byte loops say.
func TestWordChecks(t *testing.T) {
	fillers := []byte{'a', '!', '~', ' ', '\t', '9', 0x80, 0xff, 0x7e}
	buf := make([]byte, 40)
	for _, fill := range fillers {
		for n := 1; n <= len(buf); n++ {
			s := buf[:n]
			for pos := range n {
				for c := range 256 {
					for i := range s {
						s[i] = fill
					}
					s[pos] = byte(c)
					str := string(s)
					if got, want := plainName(str), byteName(str); got != want {
						t.Fatalf("plainName(%q) = %v, the byte rule says %v", str, got, want)
					}
					if got, want := clean(str), byteClean(str); got != want {
						t.Fatalf("clean(%q) = %v, the byte rule says %v", str, got, want)
					}
				}
			}
		}
	}
	if plainName("") {
		t.Error("an empty name passes")
	}
}

// TestBlockWriter writes fields through a writer too small for them
// all, lines longer than its whole buffer among them, and wants the lines
// in order, values cleaned and bad names left out.
func TestBlockWriter(t *testing.T) {
	var out bytes.Buffer
	bw := bufio.NewWriterSize(&out, 64)
	long := strings.Repeat("v", 200)
	w := newBlockWriter(bw)
	w.statusLine(true, http.StatusOK)
	w.field("X-A", []string{"1", "two"})
	w.field("Bad Name", []string{"x"})
	w.field("X-Long", []string{long})
	w.field("X-Ctl", []string{"a\r\nb\x00c\x7fd\te\x80"})
	w.str("\r\n")
	w.flush()
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "HTTP/1.1 200 OK\r\nX-A: 1\r\nX-A: two\r\nX-Long: " + long + "\r\nX-Ctl: a  b c d\te\x80\r\n\r\n"
	if got := out.String(); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

// TestHeaderSizeHint serves three requests on one connection: the first
// answer sets 15 fields, the second 40, the third none; each handler
// sees the size its map was made at, which is the previous answer's
// field count, bounded by maxHeaderHint.
func TestHeaderSizeHint(t *testing.T) {
	var seen []int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, w.(*response).c.headerSize)
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		hd := w.Header()
		for i := range n {
			hd["X-F"+strconv.Itoa(i)] = []string{"v"}
		}
	})
	_, own := servers(t, h)
	req := "GET /?n=15 HTTP/1.1\r\nHost: x\r\n\r\nGET /?n=40 HTTP/1.1\r\nHost: x\r\n\r\nGET /?n=0 HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
	out := exchange(t, own, []byte(req))
	if got := strings.Count(string(out), "HTTP/1.1 200 OK"); got != 4 {
		t.Fatalf("%d answers, want 4:\n%s", got, out)
	}
	if want := []int{0, 15, maxHeaderHint, 0}; !slices.Equal(seen, want) {
		t.Errorf("maps made at %v, want %v", seen, want)
	}
}

// BenchmarkHeaderMap stores the 15 fields of gatehouse's answer to a
// limited key (and the 7 of an unlimited one) in a header map made with
// no size and made at 15, then iterates it, as the engine does when it
// writes the block: what the size hint saves in growth, and what a
// larger table than the fields need costs to walk.
func BenchmarkHeaderMap(b *testing.B) {
	for _, n := range []int{15, 7} {
		b.Run("fields="+strconv.Itoa(n), func(b *testing.B) { benchmarkHeaderMap(b, n) })
	}
}

func benchmarkHeaderMap(b *testing.B, fields int) {
	names := []string{"X-Gatehouse-Request-Id", "X-Gatehouse-Provider", "X-Gatehouse-Model", "X-Gatehouse-Attempts",
		"X-Gatehouse-Cache", "X-Gatehouse-Budget-Remaining-Usd", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests",
		"X-Ratelimit-Reset-Requests", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens",
		"X-Gatehouse-Overhead-Ms", "X-Gatehouse-Cost-Usd", "Content-Type"}[:fields]
	v := []string{"1"}
	for _, hint := range []int{0, 15} {
		h := make(http.Header, hint)
		for _, k := range names {
			h[k] = v
		}
		b.Run("store/hint="+strconv.Itoa(hint), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h := make(http.Header, hint)
				for _, k := range names {
					h[k] = v
				}
			}
		})
		b.Run("iterate/hint="+strconv.Itoa(hint), func(b *testing.B) {
			n := 0
			for b.Loop() {
				for k := range h {
					n += len(k)
				}
			}
			if n == 0 {
				b.Fatal("nothing iterated")
			}
		})
	}
}
