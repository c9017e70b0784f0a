package audit

import (
	"encoding/json"
	"sync"
	"time"
)

// Refused attempts (a missing or wrong admin key, a viewer asking for a
// change, a failed dashboard login) are recorded too, but an attacker
// can make them as fast as the network allows: Refusals decides which of
// them get an entry so the log cannot be flooded.
const (
	// RefusalWindow is the period in which one source gets one entry.
	RefusalWindow = time.Minute
	// MaxRefusalSources bounds the sources with an entry of their own
	// per window; refusals from further sources share the source
	// OtherSources. At most MaxRefusalSources+1 refusal entries are
	// written per window, however many addresses an attacker has.
	MaxRefusalSources = 32
	// OtherSources stands for the sources over MaxRefusalSources.
	OtherSources = "other"
	// ObjectAccess is the object type of a refused attempt's entry, and
	// ObjectSession that of a dashboard login or logout.
	ObjectAccess  = "access"
	ObjectSession = "session"
	// UnknownActor is who a refused attempt came from when its
	// credential matched none: the presented secret is never recorded.
	UnknownActor = "unknown"
)

// Refusals coalesces refused attempts per source (the client's address)
// and window: the first of a window is recorded, the rest are counted and
// reported by the source's next recorded entry. The zero value is ready;
// it is safe for concurrent use.
type Refusals struct {
	mu     sync.Mutex
	window int64           // the window seen covers, in RefusalWindow units
	seen   map[string]bool // sources recorded in this window
	// skipped counts, by source, the refusals not recorded since the
	// source's last entry; it holds at most MaxRefusalSources+1 sources.
	skipped map[string]int
}

// Admit says whether a refusal from source at now gets an entry. When it
// does, as is the source to record (OtherSources once the window has
// MaxRefusalSources) and skipped how many refusals of that source went
// unrecorded before it.
func (f *Refusals) Admit(source string, now time.Time) (record bool, as string, skipped int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := now.UnixNano() / int64(RefusalWindow)
	if f.seen == nil || w != f.window {
		f.window, f.seen = w, make(map[string]bool)
	}
	if f.skipped == nil {
		f.skipped = make(map[string]int)
	}
	if !f.seen[source] && len(f.seen) >= MaxRefusalSources {
		source = OtherSources
	}
	if f.seen[source] {
		if _, counted := f.skipped[source]; !counted && len(f.skipped) >= MaxRefusalSources {
			source = OtherSources
		}
		f.skipped[source]++
		return false, source, 0
	}
	f.seen[source] = true
	skipped = f.skipped[source]
	delete(f.skipped, source)
	return true, source, skipped
}

// Refusal is the After of a refused attempt's entry: the error code it
// was answered with, the source recorded, and how many refusals of that
// source went unrecorded before this one.
func Refusal(code, source string, skipped int) json.RawMessage {
	v := struct {
		Refused     string `json:"refused"`
		Source      string `json:"source"`
		NotRecorded int    `json:"not_recorded_before,omitempty"`
	}{code, source, skipped}
	raw, _ := json.Marshal(v)
	return raw
}
