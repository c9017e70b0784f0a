package llm

import "sync/atomic"

// TextMemoValues is how many strings a TextMemo's text is made of.
const TextMemoValues = 6

// textMemoSlots is how many texts a TextMemo keeps. A key's requests
// nearly always name one model served by one deployment; a few slots
// keep a key that balances over several deployments, or calls a few
// models, from making its text again on every request.
const textMemoSlots = 4

// TextMemo keeps a few JSON texts, each made of TextMemoValues strings,
// so that a request whose strings are the ones a text was made of
// copies the text whole instead of writing it member by member. The
// request log line keeps one per key (auth.Principal.LineMemo) for its
// members from "stream" to "project", which every request of the key
// writes alike: one comparison of six strings and one copy, where the
// members cost a dozen copies, their quotes and their checks.
//
// A text is kept with the strings it was made of and is given only for
// those (compared by SameString: mostly the very strings, whose address
// answers), so a renamed key, project or deployment finds no text and
// makes a new one; a memo shared by copies of a principal is therefore
// harmless. Entries are immutable and published through atomic
// pointers, so the memo is safe for concurrent use; when every slot is
// taken, a new text replaces the slots in turn. The zero value is an
// empty memo.
type TextMemo struct {
	slots [textMemoSlots]atomic.Pointer[memoText]
	next  atomic.Uint32 // the slot Keep fills next
}

type memoText struct {
	values [TextMemoValues]string
	text   string
}

// Find returns the text kept for exactly these values, or "".
func (m *TextMemo) Find(values *[TextMemoValues]string) string {
	for i := range m.slots {
		e := m.slots[i].Load()
		if e == nil {
			return "" // slots fill in order: none after an empty one (but in a race, which costs a miss)
		}
		if sameValues(&e.values, values) {
			return e.text
		}
	}
	return ""
}

// Keep remembers text as the one made of values (copied).
func (m *TextMemo) Keep(values *[TextMemoValues]string, text string) {
	i := (m.next.Add(1) - 1) % textMemoSlots
	m.slots[i].Store(&memoText{values: *values, text: text})
}

// sameValues is SameString of each pair, written out: a hit compares
// all six, mostly by address alone.
func sameValues(a, b *[TextMemoValues]string) bool {
	if len(a[0]) != len(b[0]) || len(a[1]) != len(b[1]) || len(a[2]) != len(b[2]) ||
		len(a[3]) != len(b[3]) || len(a[4]) != len(b[4]) || len(a[5]) != len(b[5]) {
		return false
	}
	return SameData(a[0], b[0]) && SameData(a[1], b[1]) && SameData(a[2], b[2]) &&
		SameData(a[3], b[3]) && SameData(a[4], b[4]) && SameData(a[5], b[5])
}
