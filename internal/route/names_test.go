package route

import (
	"testing"

	"gatehouse/internal/provider"
)

// TestNames: a backend's names are given for the deployment they were
// made of — the same strings or equal ones — and made afresh for any
// other (a deployment renamed after its backend was made) or without a
// backend, names holding the separator themselves included.
func TestNames(t *testing.T) {
	d := &provider.Deployment{Provider: "open\"ai", Model: "gpt-4o-mini"}
	n := &NewPool(PoolOptions{}).Backend(d).Names
	if got := n.Checked(d).Joined(d); got != "open\"ai/gpt-4o-mini" {
		t.Errorf("made: %q", got)
	}
	if got := n.Checked(d).Members(); got != `,"provider":"open\"ai","upstream_model":"gpt-4o-mini"` {
		t.Errorf("made: members %s", got)
	}
	if a := testing.AllocsPerRun(100, func() { _ = n.Checked(d).Joined(d) }); a != 0 {
		t.Errorf("made: %v allocations a call, want 0", a)
	}
	equal := &provider.Deployment{Provider: string([]byte(d.Provider)), Model: string([]byte(d.Model))}
	if got := n.Checked(equal).Joined(equal); got != "open\"ai/gpt-4o-mini" || n.Checked(equal).Members() == "" {
		t.Errorf("equal names in other strings: %q", got)
	}
	for _, other := range []*provider.Deployment{
		{Provider: "open\"ai", Model: "gpt-4o"}, {Provider: "anthropic", Model: "gpt-4o-mini"},
		{Provider: "open\"ai/gpt-4o", Model: "mini"}, {Provider: "", Model: ""},
	} {
		if got, want := n.Checked(other).Joined(other), other.Provider+"/"+other.Model; got != want {
			t.Errorf("%+v: %q, want %q", other, got, want)
		}
		if got := n.Checked(other).Members(); got != "" {
			t.Errorf("%+v: members %s, want none", other, got)
		}
	}
	var none *Names
	if got := none.Checked(d).Joined(d); got != "open\"ai/gpt-4o-mini" || none.Checked(d).Members() != "" {
		t.Errorf("no backend: %q", got)
	}
	// Checked once, read without checking again.
	if n.Checked(d) != n || n.Checked(equal) != n {
		t.Error("names made of the deployment's not given by Checked")
	}
	if got, want := n.Checked(d).Members(), `,"provider":"open\"ai","upstream_model":"gpt-4o-mini"`; got != want {
		t.Errorf("checked: members %s, want %s", got, want)
	}
	if got := n.Checked(d).Joined(d); got != "open\"ai/gpt-4o-mini" {
		t.Errorf("checked: name %q", got)
	}
	moved := &provider.Deployment{Provider: d.Provider, Model: "gpt-4o"}
	if c := n.Checked(moved); c != nil || c.Members() != "" || c.Joined(moved) != "open\"ai/gpt-4o" {
		t.Errorf("another deployment's names: %+v, want nil, whose members are none and name made afresh", c)
	}
	if none.Checked(d) != nil || (&Names{}).Checked(d) != nil {
		t.Error("no names, or zero names, given by Checked")
	}
	ab := &provider.Deployment{Provider: "a", Model: "b/c"}
	if got := (&Names{}).Checked(ab).Joined(ab); got != "a/b/c" {
		t.Errorf("zero names: %q", got)
	}
}
