package llm

import (
	"strings"
	"testing"
)

func TestWalkObjectsAndArrays(t *testing.T) {
	obj := []byte(` { "a" : "x\"}]" , "b":[1,{"c":"]"}] ,"d":null,"e":-1.5e3}`)
	var got []string
	w := Walk(obj, '{')
	for k, v, ok := w.Next(); ok; k, v, ok = w.Next() {
		got = append(got, string(k)+"="+string(v))
	}
	want := `"a"="x\"}]"|"b"=[1,{"c":"]"}]|"d"=null|"e"=-1.5e3`
	if strings.Join(got, "|") != want {
		t.Fatalf("members %q\nwant %q", strings.Join(got, "|"), want)
	}
	got = got[:0]
	a := Walk([]byte(`["a\\",  {"x":[]} ,3]`), '[')
	for k, v, ok := a.Next(); ok; k, v, ok = a.Next() {
		if k != nil {
			t.Fatalf("array element with a key %q", k)
		}
		got = append(got, string(v))
	}
	if strings.Join(got, "|") != `"a\\"|{"x":[]}|3` {
		t.Fatalf("elements %q", got)
	}
	if w := Walk([]byte(`{"a":1}`), '['); func() bool { _, _, ok := w.Next(); return ok }() {
		t.Fatal("an object walked as an array")
	}
}

func TestWalkTerminatesOnNonJSON(t *testing.T) {
	for _, in := range []string{`{`, `{"a`, `{"a":`, `[,,,`, `{"a":1 "b":2}`, `[:]`, `{::}`, `["\`} {
		w := Walk([]byte(in), in[0])
		for n := 0; ; n++ {
			if _, _, ok := w.Next(); !ok {
				break
			}
			if n > len(in) {
				t.Fatalf("%q: more members than bytes", in)
			}
		}
	}
}

func TestStringEnd(t *testing.T) {
	for in, want := range map[string]int{
		`"abc"x`:       5,
		`"a\"b"`:       6,
		`"a\\"b`:       5,
		`"a\\\"b"`:     8,
		`"cut short\"`: 12,
	} {
		if got := StringEnd([]byte(in), 0); got != want {
			t.Errorf("StringEnd(%s) = %d, want %d", in, got, want)
		}
	}
}
