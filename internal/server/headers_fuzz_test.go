package server

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzRequestHeaders feeds header blocks, as a client would send them,
// through net/http's request parser and then gatehouse's readers of the
// label, Cache-Control and x-gatehouse-cache-ttl headers: whatever gets
// past the standard library must neither panic nor be half accepted.
func FuzzRequestHeaders(f *testing.F) {
	for _, seed := range []string{
		"X-Gatehouse-Label-Team: search\r\nX-Gatehouse-Label-Env: prod",
		"x-gatehouse-label-team: a\r\nx-gatehouse-label-team: b",
		"X-Gatehouse-Label-: empty\r\nX-Gatehouse-Label-Ünï: x",
		"X-Gatehouse-Label-A: 1\r\nX-Gatehouse-Label-B: 2\r\nX-Gatehouse-Label-C: 3\r\nX-Gatehouse-Label-D: 4\r\n" +
			"X-Gatehouse-Label-E: 5\r\nX-Gatehouse-Label-F: 6\r\nX-Gatehouse-Label-G: 7\r\nX-Gatehouse-Label-H: 8\r\nX-Gatehouse-Label-I: 9",
		"X-Gatehouse-Label-Long: " + strings.Repeat("v", 129),
		"Cache-Control: no-cache, No-Store\r\nX-Gatehouse-Cache-Ttl: 60",
		"Cache-Control: max-age=0,,no-cache\r\nCache-Control: private\r\nX-Gatehouse-Cache-Ttl:  +007 ",
		"X-Gatehouse-Cache-Ttl: 31536001",
		"X-Gatehouse-Cache-Ttl: -1",
		"X-Gatehouse-Cache-Ttl: 9223372036854775808",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, block string) {
		raw := "POST /v1/chat/completions HTTP/1.1\r\nHost: gatehouse\r\n" + block + "\r\n\r\n"
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // refused by net/http before gatehouse sees it
		}
		checkLabels(t, r.Header)
		noCache, noStore := cacheControl(r.Header)
		cc := strings.ToLower(strings.Join(r.Header.Values("Cache-Control"), ","))
		if noCache && !strings.Contains(cc, "no-cache") || noStore && !strings.Contains(cc, "no-store") {
			t.Fatalf("Cache-Control %q read as no-cache=%v no-store=%v", cc, noCache, noStore)
		}
		if v := r.Header.Get(hdrCacheTTL); v != "" {
			ttl, err := parseCacheTTL(v)
			switch {
			case err != nil && (err.Status != http.StatusBadRequest || err.Param != "x-gatehouse-cache-ttl"):
				t.Fatalf("ttl %q refused with %+v", v, err)
			case err == nil && (ttl < 0 || ttl > maxCacheTTL || ttl%time.Second != 0):
				t.Fatalf("ttl %q read as %v", v, ttl)
			}
		}
	})
}

// checkLabels holds parseLabels to its contract: either every label
// header kept, each valid, or a 400 naming a label header that breaks a
// rule — never some of them.
func checkLabels(t *testing.T, h http.Header) {
	t.Helper()
	labels, lerr := parseLabels(h)
	var headers []string // label header names, lower case
	broken := false
	for k, vs := range h {
		if len(k) > len(LabelPrefix) && strings.EqualFold(k[:len(LabelPrefix)], LabelPrefix) {
			name := strings.ToLower(k[len(LabelPrefix):])
			headers = append(headers, name)
			broken = broken || !validLabelName(name) || len(vs) != 1 || len(vs[0]) > maxLabelValue
		}
	}
	broken = broken || len(headers) > maxLabels
	if lerr != nil {
		if !broken || lerr.Status != http.StatusBadRequest || lerr.Code != "invalid_label" ||
			!strings.HasPrefix(lerr.Param, "x-gatehouse-label-") || labels != nil {
			t.Fatalf("labels %q refused with %+v (labels %v)", headers, lerr, labels)
		}
		return
	}
	if broken || len(labels) != len(headers) {
		t.Fatalf("labels %q accepted as %v", headers, labels)
	}
	for _, name := range headers {
		if v, ok := labels[name]; !ok || v != h.Get(LabelPrefix+name) {
			t.Fatalf("label %q: kept %q, sent %q", name, v, h.Get(LabelPrefix+name))
		}
	}
}
