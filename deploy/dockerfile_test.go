package deploy

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY …
	args string
	line int
}

// stage is the instructions from one FROM to the next.
type stage struct {
	from string // the FROM line's arguments
	ins  []instruction
}

// parseDockerfile reads the subset of the syntax the Dockerfile uses:
// comments, blank lines, and backslash continuations (comment lines
// inside one are dropped, as Docker does). It knows no parser
// directives and no heredocs, and says so if it meets one.
func parseDockerfile(text string) ([]stage, error) {
	var stages []stage
	var cur *instruction
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			if strings.HasPrefix(trimmed, "# syntax=") || strings.HasPrefix(trimmed, "# escape=") {
				return nil, fmt.Errorf("line %d: parser directives are not understood here", i+1)
			}
			continue
		}
		if strings.Contains(trimmed, "<<") {
			return nil, fmt.Errorf("line %d: heredocs are not understood here", i+1)
		}
		cont := strings.HasSuffix(trimmed, `\`)
		trimmed = strings.TrimSpace(strings.TrimSuffix(trimmed, `\`))
		if cur == nil {
			cmd, args, _ := strings.Cut(trimmed, " ")
			cur = &instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: i + 1}
		} else {
			cur.args += " " + trimmed
		}
		if cont {
			continue
		}
		if cur.cmd == "FROM" {
			stages = append(stages, stage{from: cur.args})
		} else if len(stages) == 0 {
			return nil, fmt.Errorf("line %d: %s before the first FROM", cur.line, cur.cmd)
		} else {
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, *cur)
		}
		cur = nil
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: the file ends inside a continuation", cur.line)
	}
	return stages, nil
}

// all returns the stage's instructions of one kind.
func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// one returns the stage's single instruction of a kind, failing the test
// when there is none or more than one.
func (s stage) one(t *testing.T, cmd string) instruction {
	t.Helper()
	all := s.all(cmd)
	if len(all) != 1 {
		t.Fatalf("the final stage has %d %s instructions, want 1", len(all), cmd)
	}
	return all[0]
}

// execForm decodes a JSON array argument (ENTRYPOINT ["/gatehouse"]).
func execForm(t *testing.T, in instruction) []string {
	t.Helper()
	var args []string
	if err := json.Unmarshal([]byte(in.args), &args); err != nil || len(args) == 0 {
		t.Fatalf("line %d: %s %s is not in exec form (a JSON array): a distroless image has no shell", in.line, in.cmd, in.args)
	}
	return args
}

// envOf reads the stage's ENV instructions (KEY=VALUE form only).
func envOf(t *testing.T, s stage) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, in := range s.all("ENV") {
		for _, kv := range strings.Fields(in.args) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("line %d: ENV %s: want KEY=VALUE", in.line, in.args)
			}
			env[k] = strings.Trim(v, `"`)
		}
	}
	return env
}

// copies maps each path the stage copies to its source: a file of the
// build context, or "stage:path" for COPY --from=stage.
func copies(t *testing.T, s stage) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, in := range s.all("COPY") {
		from := ""
		var paths []string
		for _, f := range strings.Fields(in.args) {
			switch {
			case strings.HasPrefix(f, "--from="):
				from = strings.TrimPrefix(f, "--from=") + ":"
			case strings.HasPrefix(f, "--"):
			default:
				paths = append(paths, f)
			}
		}
		if len(paths) != 2 {
			t.Fatalf("line %d: COPY %s: want one source and one destination", in.line, in.args)
		}
		out[paths[1]] = from + paths[0]
	}
	return out
}

// dockerignore is a .dockerignore: patterns matched, in order, against
// slash-separated paths relative to the context, a later match winning
// and "!" re-including. A pattern that matches a directory excludes what
// is under it.
type dockerignore []ignoreRule

type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

func parseDockerignore(text string) (dockerignore, error) {
	var d dockerignore
	for _, line := range strings.Split(text, "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		r := ignoreRule{}
		if r.negate = strings.HasPrefix(p, "!"); r.negate {
			p = p[1:]
		}
		if strings.ContainsAny(p, `[\`) {
			return nil, fmt.Errorf("pattern %q: character classes and escapes are not understood here", p)
		}
		p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(p)), "/")
		var re strings.Builder
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		r.re = regexp.MustCompile("^" + re.String() + "$")
		d = append(d, r)
	}
	return d, nil
}

// excluded reports whether path (slash-separated, relative) stays out of
// the context.
func (d dockerignore) excluded(path string) bool {
	out := false
	for _, r := range d {
		for p := path; p != "."; p = filepath.Dir(p) {
			if r.re.MatchString(p) {
				out = !r.negate
				break
			}
		}
	}
	return out
}

func (d dockerignore) hasNegation() bool {
	for _, r := range d {
		if r.negate {
			return true
		}
	}
	return false
}

// buildContext copies what .dockerignore lets through to a new folder:
// the files a docker build of the repository sees.
func buildContext(t *testing.T) string {
	t.Helper()
	ignore, err := parseDockerignore(readFile(t, ".dockerignore"))
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	dst := t.TempDir()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ignore.excluded(rel) {
			if d.IsDir() && !ignore.hasNegation() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copy the build context: %v", err)
	}
	return dst
}

func TestDockerignore(t *testing.T) {
	d, err := parseDockerignore("bin\n**/node_modules\n*.md\n**/*_test.go\nweb/src\n!web/src/keep.ts\n")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, p := range []string{"bin", "bin/gatehouse", "web/node_modules/x/y.js", "node_modules/a", "README.md",
		"docs/providers.md", "cmd/gatehouse/main.go", "cmd/gatehouse/main_test.go", "web/src/app.ts", "web/src/keep.ts", "web/dist/index.html"} {
		got[p] = d.excluded(p)
	}
	want := map[string]bool{"bin": true, "bin/gatehouse": true, "web/node_modules/x/y.js": true, "node_modules/a": true, "README.md": true,
		"docs/providers.md": false, "cmd/gatehouse/main.go": false, "cmd/gatehouse/main_test.go": true, "web/src/app.ts": true,
		"web/src/keep.ts": false, "web/dist/index.html": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("excluded (-want +got):\n%s", diff)
	}
}

func TestParseDockerfile(t *testing.T) {
	stages, err := parseDockerfile("# c\nFROM a AS build\nRUN x && \\\n  # inside\n  y\n\nFROM b\nCMD [\"serve\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%+v", stages)
	want := "[{from:a AS build ins:[{cmd:RUN args:x && y line:3}]} {from:b ins:[{cmd:CMD args:[\"serve\"] line:8}]}]"
	if got != want {
		t.Errorf("parsed\n%s\nwant\n%s", got, want)
	}
	for _, bad := range []string{"RUN x\n", "FROM a\nRUN x \\\n", "# syntax=docker/dockerfile:1\nFROM a\n", "FROM a\nRUN <<EOF\n"} {
		if _, err := parseDockerfile(bad); err == nil {
			t.Errorf("parseDockerfile(%q): no error", bad)
		}
	}
}
