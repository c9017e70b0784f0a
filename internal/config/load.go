package config

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"reflect"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"gatehouse/internal/provider"
)

// Load reads and parses the config file at path. See Parse.
func Load(path string, types *provider.Registry) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, path, types)
}

// Parse expands ${VAR} references from the environment, decodes the YAML
// strictly (unknown fields and wrong types are errors), validates the result
// and applies defaults. filename only labels errors. types are the
// provider types this build serves: a provider's type must be one of
// them, and its type-specific fields (preset, api_version, region,
// discover) must be ones its type accepts.
//
// On failure it returns a *Errors listing every problem found, each with its
// line, column and field path; the Config is nil.
func Parse(data []byte, filename string, types *provider.Registry) (*Config, error) {
	return parse(data, filename, types, os.LookupEnv)
}

func parse(data []byte, filename string, types *provider.Registry, lookup func(string) (string, bool)) (*Config, error) {
	sum := sha256.Sum256(data)
	data = normalizeNewlines(data)
	text, pm, envErrs, envValues := expand(data, lookup)
	d := newDecoder(pm)
	cfg := &Config{}
	var errs []FieldError
	f, err := parser.ParseBytes(text, 0)
	if err != nil {
		errs = append(errs, syntaxError(d, err))
		scrub(errs, envValues) // a syntax error may quote any text of the file
	} else {
		d.document(f, cfg)
		c := &checker{d: d, types: types}
		c.config(cfg)
		errs = append(d.errs, c.errs...)
		scrub(errs, secretValues(cfg))
	}
	if len(envErrs) > 0 {
		errs = withEnvErrors(errs, envErrs, data, d)
	}
	if len(errs) > 0 {
		for i := range errs {
			errs[i].File = filename
		}
		sortErrors(errs)
		e := Errors(errs)
		return nil, &e
	}
	applyDefaults(cfg, d)
	cfg.buildIndex()
	cfg.source, cfg.hasSource = sum, true
	return cfg, nil
}

// normalizeNewlines turns \r\n and a lone \r into \n. YAML reads all three
// as one line break, but the parser miscounts lines at a \r\n inside a
// quoted scalar; afterwards every line number agrees with an editor's.
func normalizeNewlines(b []byte) []byte {
	if !bytes.ContainsRune(b, '\r') {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] != '\r':
			out = append(out, b[i])
		case i+1 < len(b) && b[i+1] == '\n':
			// dropped: the \n follows
		default:
			out = append(out, '\n')
		}
	}
	return out
}

// syntaxError converts the parser's error, without its source excerpt.
func syntaxError(d *decoder, err error) FieldError {
	var ye yaml.Error
	if errors.As(err, &ye) {
		p := d.tokenPos(ye.GetToken())
		return FieldError{Line: p.line, Column: p.col, Message: "invalid YAML: " + ye.GetMessage()}
	}
	return FieldError{Message: "invalid YAML: " + err.Error()}
}

// document decodes the single YAML document of f into cfg.
func (d *decoder) document(f *ast.File, cfg *Config) {
	var body ast.Node
	for _, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			d.errorAt(d.position(doc.Body), "", "a config file holds one YAML document; found another")
			break
		}
		body = doc.Body
	}
	if body == nil {
		return // an empty file: all defaults
	}
	d.collectAnchors(body)
	d.decode("", body, reflect.ValueOf(cfg).Elem(), "")
}

// withEnvErrors adds the reference problems and drops other problems on the
// same lines: they are consequences (an unset variable reads as empty).
func withEnvErrors(errs []FieldError, envErrs []envError, src []byte, d *decoder) []FieldError {
	rows := rowStarts(src)
	lines := map[int]bool{}
	var out []FieldError
	for _, e := range envErrs {
		line, col := lineColOf(src, rows, e.off)
		lines[line] = true
		out = append(out, FieldError{Line: line, Column: col, Field: fieldAt(d, line, col), Message: e.msg})
	}
	for _, e := range errs {
		if !lines[e.Line] {
			out = append(out, e)
		}
	}
	return out
}

// fieldAt names the field whose value starts last on line at or before col:
// the field a reference at line:col belongs to.
func fieldAt(d *decoder, line, col int) string {
	best, bestCol := "", 0
	for path, p := range d.at {
		if p.line == line && p.col <= col && (p.col > bestCol || p.col == bestCol && (len(path) > len(best) || len(path) == len(best) && path < best)) {
			best, bestCol = path, p.col
		}
	}
	return best
}
