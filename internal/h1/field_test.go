package h1

import (
	"bufio"
	"bytes"
	"net/http"
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
