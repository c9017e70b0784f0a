package limit

// Template is the part of a set of admissions that is the same from one
// request to the next — a key's own and its project's rates and
// budgets, with their names, IDs and parsed periods — made once and
// then listed, as it is, by each admission: an Admission whose Rates
// and Budgets are a Template's own slices costs its caller no building
// and the admitter no comparing (a Memo's plan made from a Template
// fits any admission that lists the same Template, found by the
// slices' addresses).
//
// A Template is never changed once made, and nor are its slices: an
// admission must list them as Rates and Budgets returns them, or copy
// them to change them. NewTemplate copies what it is given and caps the
// slices at their length, so that an append to one makes a new array.
type Template struct {
	rates   []Rate
	budgets []Budget
	source  any
}

// NewTemplate makes a Template of copies of rates and budgets. source
// is the caller's record of what it made them from (Source returns it),
// by which it tells whether a Template kept in a Memo still applies.
func NewTemplate(rates []Rate, budgets []Budget, source any) *Template {
	return &Template{
		rates:   append([]Rate(nil), rates...)[:len(rates):len(rates)],
		budgets: append([]Budget(nil), budgets...)[:len(budgets):len(budgets)],
		source:  source,
	}
}

// Rates returns the template's rates: to be listed, not changed.
func (t *Template) Rates() []Rate { return t.rates }

// Budgets returns the template's budgets: to be listed, not changed.
func (t *Template) Budgets() []Budget { return t.budgets }

// Source returns what NewTemplate was given as source.
func (t *Template) Source() any { return t.source }

// listedBy reports whether a lists t's rates and budgets as its own,
// the very slices: then they are t's values, which never change.
func (t *Template) listedBy(a *Admission) bool {
	return sameSlice(a.Rates, t.rates) && sameSlice(a.Budgets, t.budgets)
}

// sameSlice reports whether a and b are one slice (same start, same
// length); two empty slices are.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
