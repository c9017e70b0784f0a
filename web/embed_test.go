package web

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"testing"
)

// budget is the most the dashboard may weigh, gzipped, all files
// together: it loads on a phone over a slow link, and a chart library
// that needs more is the wrong one.
const budget = 250 << 10

func TestDistWithinBudget(t *testing.T) {
	dist := Dist()
	if _, err := fs.Stat(dist, "index.html"); err != nil {
		t.Fatalf("web/dist has no index.html (run make ui): %v", err)
	}
	total, files := 0, 0
	err := fs.WalkDir(dist, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(dist, p)
		if err != nil {
			return err
		}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		w.Write(b)
		w.Close()
		total += z.Len()
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("web/dist: %d files, %d bytes gzipped", files, total)
	if total > budget {
		t.Errorf("web/dist weighs %d bytes gzipped, over the %d-byte budget", total, budget)
	}
}
