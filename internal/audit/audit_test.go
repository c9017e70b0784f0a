package audit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMask(t *testing.T) {
	type view struct {
		ID     string            `json:"id"`
		Key    string            `json:"key,omitempty"`
		Prefix string            `json:"prefix"`
		Labels map[string]string `json:"labels"`
		Nested []map[string]any  `json:"nested"`
		USD    json.Number       `json:"usd"`
	}
	v := view{ID: "key_1", Key: "gh-SECRET", Prefix: "gh-SECR", USD: "0.100000",
		Labels: map[string]string{"note": "copy of gh-ISSUED here", "team": "a"},
		Nested: []map[string]any{{"API_Key": "sk-1", "password": "", "name": "x"}}}
	got := string(Mask(v, "gh-ISSUED"))
	var m map[string]any
	if err := json.Unmarshal([]byte(got), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"id": "key_1", "key": Masked, "prefix": "gh-SECR", "usd": 0.1,
		"labels": map[string]any{"note": Masked, "team": "a"},
		"nested": []any{map[string]any{"API_Key": Masked, "password": "", "name": "x"}},
	}
	if d := cmp.Diff(want, m); d != "" {
		t.Errorf("Mask (-want +got):\n%s", d)
	}
	for _, s := range []string{"gh-SECRET", "sk-1", "gh-ISSUED"} {
		if strings.Contains(got, s) {
			t.Errorf("masked JSON still holds %q: %s", s, got)
		}
	}
	if !strings.Contains(got, `"usd":0.100000`) {
		t.Errorf("numbers were rewritten: %s", got)
	}
}

func TestMaskOfTheUnencodable(t *testing.T) {
	if got := string(Mask(func() {})); got != "null" {
		t.Errorf("Mask(func) = %s, want null", got)
	}
	if got := string(Mask(nil)); got != "null" {
		t.Errorf("Mask(nil) = %s", got)
	}
}
