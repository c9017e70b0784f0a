package postgres

import (
	"math/rand/v2"
	"testing"
	"time"
)

// appendTimestamp must write what the layout it replaces writes, but
// with all six fractional digits, for any instant and zone.
func TestAppendTimestamp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	zone := time.FixedZone("x", -7*3600-30*60)
	times := []time.Time{
		time.Date(2026, 3, 4, 5, 6, 7, 891234999, time.UTC),
		time.Date(2026, 12, 31, 23, 59, 59, 999999999, zone),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for range 1000 {
		times = append(times, time.Unix(rng.Int64N(1<<35), rng.Int64N(1e9)).In(zone))
	}
	for _, at := range times {
		want := at.UTC().Format("2006-01-02 15:04:05.000000Z07:00")
		if got := string(appendTimestamp(nil, at)); got != want {
			t.Fatalf("%v: %q, want %q", at, got, want)
		}
	}
}

func TestAppendCopyText(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"plain ascii":      "plain ascii",
		"a\tb\nc\rd\\e":    `a\tb\nc\rd\\e`,
		"nul\x00gone":      "nulgone",
		"ünï €":            "ünï €",
		"bad\xffbyte":      "bad\uFFFDbyte",
		`\N is not a null`: `\\N is not a null`,
	} {
		if got := string(appendCopyText([]byte("x"), in)); got != "x"+want {
			t.Errorf("%q: %q, want %q", in, got, "x"+want)
		}
	}
}
