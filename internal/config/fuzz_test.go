package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser. It must never panic, must
// fail only with *Errors whose positions lie inside the input, and a Config
// it accepts must be usable.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	files = append(files, "../../examples/demo.yaml")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"", "~", "[]", "- a", "listen: [", "a: b\na: c\n", "---\n---\nlisten: x\n",
		"listen: ${SET}\nadmin_key: ${UNSET}\n", "x: ${", "x: $${SET}", "# ${UNSET}\nlisten: ':1'",
		"providers: &p [*p]\n", "a: &a {<<: *a}\n", "models: [{<<: [*x]}]\n",
		"x-a: &a {name: m}\nmodels: [*a, *a]\n", "server: {max_body_bytes: 1e400}\n",
		"keys: [{key: k, rpm: 18446744073709551616}]\n", "cache: {semantic: {threshold: .inf}}\n",
		"providers: [{name: a, type: mock, headers: {? [x] : y}}]\n", "listen: !!binary aGVsbG8=\n",
		"timeouts: {connect: -9223372036854775808ns}\n", "models:\n  - name: m\n    targets:\n      - |\n        x\n",
	} {
		f.Add([]byte(s))
	}
	env := fakeEnv(map[string]string{"SET": "value: {", "EMPTY": ""})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parse(data, "fuzz.yaml", testTypes(), env)
		if err != nil {
			var errs *Errors
			if !errors.As(err, &errs) || len(*errs) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty *Errors", err, err)
			}
			// YAML breaks lines at \n, \r\n and a lone \r.
			lines := strings.Count(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n") + strings.Count(string(data), "\r") - strings.Count(string(data), "\r\n") + 1
			for _, fe := range *errs {
				if fe.Line < 0 || fe.Line > lines || fe.Column < 0 {
					t.Fatalf("position %d:%d outside the input (%d lines): %v", fe.Line, fe.Column, lines, fe)
				}
			}
			_ = err.Error()
			return
		}
		for i := range cfg.Models {
			if m, ok := cfg.Model(cfg.Models[i].Name); !ok || m.Name != cfg.Models[i].Name {
				t.Fatalf("Model(%q) not found", cfg.Models[i].Name)
			}
		}
		_ = cfg.String()
	})
}
