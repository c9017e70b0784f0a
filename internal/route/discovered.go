package route

// Discovered is a set of models found by asking providers what they serve
// (Ollama's pulled models), routable without a models entry. It is
// immutable: whoever polls the providers builds a new set and swaps it in
// with Table.SetDiscovered, so a lookup never waits for a poll.
type Discovered struct {
	groups map[string]*Group
	listed []*Group
}

// NewDiscovered indexes groups by name for lookups and model listings;
// aliases are looked up but not listed (such as "llama3.2" for
// "llama3.2:latest"). Names are unique: the first group of a name wins.
func NewDiscovered(groups, aliases []*Group) *Discovered {
	d := &Discovered{groups: make(map[string]*Group, len(groups)+len(aliases))}
	for _, g := range groups {
		if _, dup := d.groups[g.Name]; !dup {
			d.groups[g.Name] = g
			d.listed = append(d.listed, g)
		}
	}
	for _, g := range aliases {
		if _, dup := d.groups[g.Name]; !dup {
			d.groups[g.Name] = g
		}
	}
	return d
}

// SetDiscovered replaces the discovered models; nil removes them all. A
// configured model of the same name always wins over a discovered one.
func (t *Table) SetDiscovered(d *Discovered) { t.discovered.Store(d) }

// Discovered lists the discovered groups a client can see: those no
// configured model shadows, in discovery order. It is nil when nothing was
// discovered.
func (t *Table) Discovered() []*Group {
	d := t.discovered.Load()
	if d == nil {
		return nil
	}
	var out []*Group
	for _, g := range d.listed {
		if _, configured := t.groups[g.Name]; !configured {
			out = append(out, g)
		}
	}
	return out
}
