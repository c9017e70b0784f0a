package audit

import (
	"fmt"
	"testing"
	"time"
)

func TestRefusalsCoalescePerSourceAndWindow(t *testing.T) {
	var f Refusals
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	type got struct {
		record  bool
		as      string
		skipped int
	}
	admit := func(src string, at time.Time) got {
		r, as, n := f.Admit(src, at)
		return got{r, as, n}
	}
	steps := []struct {
		src  string
		at   time.Time
		want got
	}{
		{"10.0.0.1", t0, got{true, "10.0.0.1", 0}},
		{"10.0.0.1", t0.Add(time.Second), got{false, "10.0.0.1", 0}},
		{"10.0.0.1", t0.Add(59 * time.Second), got{false, "10.0.0.1", 0}},
		{"10.0.0.2", t0.Add(2 * time.Second), got{true, "10.0.0.2", 0}},
		// The next window: one entry again, reporting the two not written.
		{"10.0.0.1", t0.Add(time.Minute), got{true, "10.0.0.1", 2}},
		{"10.0.0.1", t0.Add(time.Minute + time.Second), got{false, "10.0.0.1", 0}},
		{"10.0.0.2", t0.Add(time.Minute), got{true, "10.0.0.2", 0}},
	}
	for i, s := range steps {
		if g := admit(s.src, s.at); g != s.want {
			t.Fatalf("step %d (%s at %s): got %+v, want %+v", i, s.src, s.at.Format(time.TimeOnly), g, s.want)
		}
	}
}

// However many addresses send refused attempts, a window gets at most
// MaxRefusalSources+1 entries.
func TestRefusalsBoundEntriesPerWindow(t *testing.T) {
	var f Refusals
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	entries, others := 0, 0
	for i := 0; i < 10*MaxRefusalSources; i++ {
		for j := 0; j < 3; j++ {
			if ok, as, _ := f.Admit(fmt.Sprintf("10.0.%d.%d", i/256, i%256), t0.Add(time.Duration(i)*time.Millisecond)); ok {
				entries++
				if as == OtherSources {
					others++
				}
			}
		}
	}
	if entries != MaxRefusalSources+1 || others != 1 {
		t.Fatalf("%d entries (%d for other sources), want %d (1)", entries, others, MaxRefusalSources+1)
	}
	if len(f.skipped) > MaxRefusalSources+1 {
		t.Fatalf("%d sources counted, want at most %d", len(f.skipped), MaxRefusalSources+1)
	}
	// The next window reports what the crowd sent meanwhile.
	ok, as, n := f.Admit("10.9.9.9", t0.Add(time.Minute))
	if !ok || as != "10.9.9.9" || n != 0 {
		t.Fatalf("new source in a new window: %v %q %d", ok, as, n)
	}
	for i := 0; i < MaxRefusalSources-1; i++ {
		f.Admit(fmt.Sprintf("10.8.0.%d", i), t0.Add(time.Minute))
	}
	ok, as, n = f.Admit("10.7.7.7", t0.Add(time.Minute))
	want := 10*MaxRefusalSources*3 - (MaxRefusalSources + 1) - 2*MaxRefusalSources // skipped over the cap
	if !ok || as != OtherSources || n != want {
		t.Fatalf("the other sources' entry: %v %q skipped %d, want %d", ok, as, n, want)
	}
}
