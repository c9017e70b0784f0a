package llm

import (
	"strconv"
	"strings"
	"sync"
	"testing"
)

func memoValues(i int) [TextMemoValues]string {
	return [TextMemoValues]string{"false", "model" + strconv.Itoa(i), "up", "gpt", "key", "project"}
}

// TestTextMemo: a text is found for equal values only (the same strings
// or equal copies), the last textMemoSlots kept are all found, and an
// older one is replaced.
func TestTextMemo(t *testing.T) {
	var m TextMemo
	v := memoValues(0)
	if got := m.Find(&v); got != "" {
		t.Fatalf("empty memo gave %q", got)
	}
	m.Keep(&v, "text0")
	copied := memoValues(0) // equal, not the same strings
	if got := m.Find(&copied); got != "text0" {
		t.Fatalf("equal values gave %q", got)
	}
	for i := range TextMemoValues {
		other := v
		other[i] += "x"
		if got := m.Find(&other); got != "" {
			t.Errorf("value %d changed: gave %q", i, got)
		}
	}
	for i := 1; i <= textMemoSlots; i++ {
		v := memoValues(i)
		m.Keep(&v, "text"+strconv.Itoa(i))
	}
	if got := m.Find(&v); got != "" {
		t.Errorf("the oldest text was not replaced: %q", got)
	}
	for i := 1; i <= textMemoSlots; i++ {
		v := memoValues(i)
		if got := m.Find(&v); got != "text"+strconv.Itoa(i) {
			t.Errorf("text %d: got %q", i, got)
		}
	}
}

// TestTextMemoConcurrent: under concurrent Keeps and Finds (run with
// -race), a found text is always the one kept for its values.
func TestTextMemoConcurrent(t *testing.T) {
	var m TextMemo
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := (g + i) % (2 * textMemoSlots)
				v := memoValues(k)
				want := strings.Repeat("t", k+1)
				if got := m.Find(&v); got != "" && got != want {
					t.Errorf("values %d gave %q", k, got)
					return
				}
				m.Keep(&v, want)
			}
		})
	}
	wg.Wait()
}
