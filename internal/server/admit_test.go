package server

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/limit"
	"gatehouse/internal/tokens"
)

func TestResetString(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0s",
		-time.Second:            "0s",
		19*time.Millisecond + 1: "20ms",
		time.Second:             "1s",
		1500 * time.Millisecond: "2s",
		6 * time.Minute:         "6m0s",
	} {
		if got := resetString(d); got != want {
			t.Errorf("resetString(%v) = %q, want %q", d, got, want)
		}
	}
}

// embeddedLimits is an in-process admitter, closed with the test, and a
// price catalog with model "m" at $1 per million tokens of each kind.
func embeddedLimits(t *testing.T) (*limit.Embedded, *tokens.Catalog) {
	t.Helper()
	e, err := limit.NewEmbedded(context.Background(), limit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	prices, err := tokens.NewCatalog(tokens.CatalogOptions{Overrides: map[string]tokens.Price{"m": tokens.PerMillion(1, 1, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	return e, prices
}

// TestPanicSettles: a request that panics after admission still settles,
// once, to zero: its reservation does not stay counted.
func TestPanicSettles(t *testing.T) {
	s, _ := newTestServer(t)
	e, prices := embeddedLimits(t)
	rt := *s.Runtime()
	rt.Limits = &Limits{Admitter: e, Prices: prices}
	rt.Auth = auth.NewStatic([]auth.StaticKey{{Secret: "k", Principal: auth.Principal{KeyID: "key1", Project: "p", RPM: 10,
		Budget: &auth.Budget{USD: 1, Period: "total"}}}})
	s.Swap(&rt)

	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"model":"chat","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer k")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d", w.Code)
	}
	if w.Header().Get("X-Ratelimit-Limit-Requests") != "10" || w.Header().Get(hdrCost) != "0.000000" {
		t.Fatalf("headers %v", w.Header())
	}
	if got := e.Spent(limit.ScopeKey, "key1", limit.Total, time.Now()); got != 0 {
		t.Fatalf("budget still holds %s after the panicked request", got)
	}
}

// TestKeyModelRate: a key's rate for one model is its own bucket, keyed
// by the key and the model the client names; the refusal names both.
func TestKeyModelRate(t *testing.T) {
	s, _ := newTestServer(t) // its one model, "chat", panics once admitted
	e, err := limit.NewEmbedded(context.Background(), limit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	prices, err := tokens.NewCatalog(tokens.CatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt := *s.Runtime()
	rt.Limits = &Limits{Admitter: e, Prices: prices}
	rt.Auth = auth.NewStatic([]auth.StaticKey{{Secret: "k", Principal: auth.Principal{KeyID: "key1", Name: "bot", Project: "p",
		ModelLimits: map[string]auth.Limits{"chat": {RPM: 2}, "other": {RPM: 1}}}}})
	s.Swap(&rt)

	for i, want := range []int{500, 500, 429} {
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
			strings.NewReader(`{"model":"chat","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer k")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code != want {
			t.Fatalf("request %d: status %d, want %d: %s", i+1, w.Code, want, w.Body)
		}
		if got := w.Header().Get("X-Ratelimit-Limit-Requests"); got != "2" {
			t.Errorf("request %d: x-ratelimit-limit-requests %q, want 2", i+1, got)
		}
		if want == 429 && !strings.Contains(w.Body.String(), "requests-per-minute limit of key and model bot/chat reached") {
			t.Errorf("refusal does not name the key and model: %s", w.Body)
		}
	}
}

func TestAppendResetMatchesDurationString(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, 0, 1, time.Millisecond, 999 * time.Millisecond, 999*time.Millisecond + 1,
		time.Second, time.Second + 1, 59 * time.Second, time.Minute, 6 * time.Minute, 61 * time.Minute, 25*time.Hour + 3*time.Second} {
		var want string
		switch {
		case d <= 0:
			want = "0s"
		case d < time.Second:
			want = ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
		default:
			want = ((d + time.Second - 1) / time.Second * time.Second).String()
		}
		if got := resetString(d); got != want {
			t.Errorf("resetString(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestQuotaHeaders: each bucket with a limit gets its three headers, with
// its own values, whichever of the two is set.
func TestQuotaHeaders(t *testing.T) {
	var principals []*auth.Principal
	for _, k := range []auth.Principal{{KeyID: "a", RPM: 100, TPM: 50000}, {KeyID: "b", RPM: 50000, ProjectLimits: auth.Limits{RPM: 1, TPM: 100}}, {KeyID: "c", RPM: 3, TPM: 4}} {
		p, _ := auth.NewStatic([]auth.StaticKey{{Secret: "gh-" + k.KeyID, Principal: k}}).Lookup("gh-" + k.KeyID)
		principals = append(principals, p)
	}
	principals = append(principals, nil)
	req := limit.Quota{Limit: 100, Remaining: 99, Reset: 600 * time.Millisecond}
	tok := limit.Quota{Limit: 50000, Remaining: -3, Reset: 90 * time.Second}
	for _, c := range []struct {
		name     string
		req, tok limit.Quota
		want     map[string]string
	}{
		{"both", req, tok, map[string]string{
			"X-Ratelimit-Limit-Requests": "100", "X-Ratelimit-Remaining-Requests": "99", "X-Ratelimit-Reset-Requests": "600ms",
			"X-Ratelimit-Limit-Tokens": "50000", "X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "1m30s"}},
		{"requests only", req, limit.Quota{}, map[string]string{
			"X-Ratelimit-Limit-Requests": "100", "X-Ratelimit-Remaining-Requests": "99", "X-Ratelimit-Reset-Requests": "600ms"}},
		{"tokens only", limit.Quota{}, tok, map[string]string{
			"X-Ratelimit-Limit-Tokens": "50000", "X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "1m30s"}},
		{"none", limit.Quota{}, limit.Quota{}, map[string]string{}},
	} {
		// No principal, one whose rates are the limits (their texts kept
		// with it), and one whose rates are other numbers: the same
		// headers.
		for _, p := range principals {
			h := http.Header{}
			quotaHeaders(h, new(headerValues), p, c.req, c.tok)
			if len(h) != len(c.want) {
				t.Errorf("%s: %d headers %v, want %v", c.name, len(h), h, c.want)
			}
			for k, v := range c.want {
				if got := h.Values(k); len(got) != 1 || got[0] != v {
					t.Errorf("%s: %s = %q, want %q", c.name, k, got, v)
				}
			}
			h.Add("X-Ratelimit-Limit-Requests", "extra") // the shared slice must not be overwritten by an append
			if c.tok.Limit > 0 && h.Get("X-Ratelimit-Remaining-Requests") != c.want["X-Ratelimit-Remaining-Requests"] {
				t.Errorf("%s: appending to one header changed another", c.name)
			}
			x := &exchange{principal: p, rt: &Runtime{Limits: &Limits{}}}
			x.adm = admission{on: true, dec: limit.Decision{Allowed: true, Requests: c.req, Tokens: c.tok}}
			lines := string(x.appendLimitFields(nil))
			var wantLines string
			for _, k := range quotaHeaderKeys {
				if v, ok := c.want[k]; ok {
					wantLines += k + ": " + v + "\r\n"
				}
			}
			if lines != wantLines {
				t.Errorf("%s: appendLimitFields = %q, want %q", c.name, lines, wantLines)
			}
		}
	}
}

// TestAnsweredBy: the three headers come out as Header.Set would write
// them, and appending to one leaves the others alone.
func TestAnsweredBy(t *testing.T) {
	got, want := http.Header{}, http.Header{}
	answeredBy(got, new(headerValues), "up", "gpt-4o-mini", "2")
	want.Set("x-gatehouse-provider", "up")
	want.Set("x-gatehouse-model", "gpt-4o-mini")
	want.Set("x-gatehouse-attempts", "2")
	var a, b bytes.Buffer
	if err := got.Write(&a); err != nil {
		t.Fatal(err)
	}
	if err := want.Write(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("answeredBy wrote\n%s\nHeader.Set writes\n%s", a.String(), b.String())
	}
	got.Add("X-Gatehouse-Provider", "other")
	if got.Get("X-Gatehouse-Model") != "gpt-4o-mini" || got.Get("X-Gatehouse-Attempts") != "2" {
		t.Fatalf("appending to one header changed another: %v", got)
	}
}

// TestDirectHeaderNames: every header name stored into the map directly
// (skipping Header.Set's canonicalisation) or read from it directly
// (headerValue) is already canonical, so Get finds it, it goes on the
// wire as Header.Set would send it, and it finds what a client sent under
// any case (the server stores incoming names canonically); and the
// shared content-type slice survives an Add.
func TestDirectHeaderNames(t *testing.T) {
	names := []string{hdrRequestID, hdrContentType, hdrProvider, hdrModel, hdrAttempts, hdrCache,
		hdrOverhead, hdrCost, hdrBudgetLeft, hdrCustomer, hdrCacheTTL, hdrTrailer}
	names = append(names, quotaHeaderKeys[:]...)
	for _, n := range names {
		if c := http.CanonicalHeaderKey(n); c != n {
			t.Errorf("%q is stored directly but its canonical form is %q", n, c)
		}
	}
	h := http.Header{}
	h[hdrContentType] = jsonContentType
	h.Add("content-type", "text/plain")
	if len(jsonContentType) != 1 || jsonContentType[0] != "application/json" {
		t.Fatalf("Add changed the shared slice: %q", jsonContentType)
	}
}

// TestPrincipalTag: a static key's tag is made once with its principal
// (no allocation per request), and a principal built without it, or
// whose project changed since, still gets the right one.
func TestPrincipalTag(t *testing.T) {
	p, ok := auth.NewStatic([]auth.StaticKey{{Secret: "s", Principal: auth.Principal{KeyID: "k", Project: "cfg"}}}).Lookup("s")
	if !ok {
		t.Fatal("static key not found")
	}
	if got := PrincipalTag(p); got != "static:cfg" {
		t.Errorf("static key: %q, want static:cfg", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = PrincipalTag(p) }); n != 0 {
		t.Errorf("static key: %v allocations a call, want 0", n)
	}
	for _, c := range []struct {
		p    auth.Principal
		want string
	}{
		{auth.Principal{KeyID: "k", Project: "cfg", ProjectID: "p1"}, "p1"},
		{auth.Principal{KeyID: "k", Project: "cfg"}, "static:cfg"},                          // built without the tag
		{auth.Principal{KeyID: "k", Project: "new", StaticTag: "static:cfg"}, "static:new"}, // renamed since
		{auth.Principal{KeyID: "k", Project: "cfg", StaticTag: "xxxxxx:cfg"}, "static:cfg"},
		{auth.Principal{KeyID: "k"}, "k"},
	} {
		if got := PrincipalTag(&c.p); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}

// TestHeaderValuesWindows: a field set from every slot of headerValues,
// then one more value added to each field in turn, leaves every other
// field as it was (a window's capacity ends at its slot).
func TestHeaderValuesWindows(t *testing.T) {
	var v headerValues
	h := http.Header{}
	for i := range valCount {
		h["X-Slot-"+strconv.Itoa(i)] = v.one(i, "v"+strconv.Itoa(i))
	}
	for i := range valCount {
		h.Add("X-Slot-"+strconv.Itoa(i), "added")
		for j := range valCount {
			want := []string{"v" + strconv.Itoa(j)}
			if j <= i {
				want = append(want, "added")
			}
			if got := h["X-Slot-"+strconv.Itoa(j)]; !slices.Equal(got, want) {
				t.Fatalf("after adding to slot %d, slot %d holds %q, want %q", i, j, got, want)
			}
		}
	}
}
