package benchcli

import (
	"context"
	"errors"
	"flag"
	"path/filepath"
	"slices"
	"testing"
)

func TestCommonFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var c Common
	c.Register(fs, "required", 3, "rounds")
	if err := fs.Parse([]string{"-gatehouse", "bin/gh", "-mockllm", "/abs/mock", "-out", "r.md", "-keep"}); err != nil {
		t.Fatal(err)
	}
	extra := "plain"
	if err := c.Absolute(&extra); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{c.Gatehouse, c.Mockllm, c.Out, extra} {
		if !filepath.IsAbs(p) {
			t.Errorf("%q is not absolute", p)
		}
	}
	if c.Mockllm != "/abs/mock" || !c.Keep || c.Rounds != 3 {
		t.Fatalf("%+v", c)
	}
}

func TestListAndInterrupted(t *testing.T) {
	if got := List(" a, b ,,c"); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("List: %q", got)
	}
	failure := errors.New("boom")
	if Interrupted(context.Background(), failure) != failure {
		t.Fatal("a failure was reported as an interrupt")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Interrupted(ctx, failure); err == nil || err.Error() != "interrupted" {
		t.Fatalf("interrupt reported as %v", err)
	}
}
