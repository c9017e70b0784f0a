package sqlite

import (
	"database/sql/driver"
	"testing"
)

// histAdd adds the counts of shared buckets, keeps the others, and
// writes the buckets ascending, whatever order the stored object had.
func TestHistAdd(t *testing.T) {
	for _, c := range []struct {
		stored, added any
		want          string
	}{
		{`{"40":3,"52":1}`, `{"40":2,"41":5}`, `{"40":5,"41":5,"52":1}`},
		{`{"52":1,"7":2}`, `{"0":1}`, `{"0":1,"7":2,"52":1}`},
		{`{}`, `{"117":4}`, `{"117":4}`},
		{[]byte(`{"3":1}`), `{}`, `{"3":1}`},
		{nil, `{"9":2}`, `{"9":2}`},
	} {
		got, err := histAdd(nil, []driver.Value{c.stored, c.added})
		if err != nil {
			t.Fatalf("histAdd(%s, %s): %v", c.stored, c.added, err)
		}
		if got != c.want {
			t.Errorf("histAdd(%s, %s) = %s, want %s", c.stored, c.added, got, c.want)
		}
	}
	for _, bad := range []driver.Value{`{"a":1}`, int64(3), `{"4"}`} {
		if got, err := histAdd(nil, []driver.Value{`{"1":1}`, bad}); err == nil {
			t.Errorf("histAdd of %v = %v, want an error", bad, got)
		}
	}
}
