// Package archtest checks the dependency rules of ../shared/DESIGN.md, so
// the layering stays true as the code grows instead of eroding quietly.
package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Standard", "gatehouse/...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(out)
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func isStd(path string) bool {
	return !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") && !strings.HasPrefix(path, "gatehouse")
}

func ours(path string) bool { return path == "gatehouse" || strings.HasPrefix(path, "gatehouse/") }

// databaseDrivers are the imports the request-path packages must not use.
var databaseDrivers = []string{"github.com/jackc/pgx", "modernc.org/sqlite", "github.com/redis/rueidis", "database/sql", "gatehouse/internal/store"}

// siblingReuse lists the provider packages allowed to import a sibling
// ("importer imported"): a provider whose wire format IS another's, so
// copying that adapter would only let the two drift apart. Azure OpenAI
// speaks OpenAI's bodies, streams and errors; the built-in demo model
// answers in OpenAI's wire format through the openai adapter.
func siblingReuse(importer, imported string) bool {
	switch importer + " " + imported {
	case "gatehouse/internal/provider/azure gatehouse/internal/provider/openai",
		"gatehouse/internal/provider/demo gatehouse/internal/provider/openai":
		return true
	}
	return false
}

func TestDependencyRules(t *testing.T) {
	for _, p := range listPackages(t) {
		path := p.ImportPath
		for _, imp := range p.Imports {
			switch {
			case path == "gatehouse/internal/llm":
				if !isStd(imp) {
					t.Errorf("%s imports %s: llm may use the standard library only", path, imp)
				}
			case path == "gatehouse/internal/messages":
				if !isStd(imp) && imp != "gatehouse/internal/llm" {
					t.Errorf("%s imports %s: the Messages dialect may import only llm", path, imp)
				}
			case strings.HasPrefix(path, "gatehouse/internal/provider/") && !strings.HasPrefix(path, "gatehouse/internal/provider/providertest"):
				if ours(imp) && imp != "gatehouse/internal/provider" && imp != "gatehouse/internal/llm" && !siblingReuse(path, imp) {
					t.Errorf("%s imports %s: provider packages may import only provider and llm", path, imp)
				}
			}
			for _, layer := range []string{"auth", "limit", "cache", "route", "stream", "admin"} {
				if path != "gatehouse/internal/"+layer && !strings.HasPrefix(path, "gatehouse/internal/"+layer+"/") {
					continue
				}
				for _, d := range databaseDrivers {
					if strings.HasPrefix(imp, d) {
						t.Errorf("%s imports %s: request-path packages declare ports; stores implement them", path, imp)
					}
				}
			}
		}
	}
}

// TestEmulatorStaysOutOfTheGateway keeps the provider emulator
// (internal/mockllm, thousands of lines of six providers' wire formats
// and failures) out of the production binary: only cmd/mockllm may
// import it, and tests. The gateway's "mock" type is the small demo model
// in provider/demo.
func TestEmulatorStaysOutOfTheGateway(t *testing.T) {
	const emulator = "gatehouse/internal/mockllm"
	for _, p := range listPackages(t) {
		if p.ImportPath == "gatehouse/cmd/mockllm" || strings.HasPrefix(p.ImportPath, emulator) {
			continue
		}
		for _, imp := range p.Imports {
			if imp == emulator || strings.HasPrefix(imp, emulator+"/") {
				t.Errorf("%s imports %s: the emulator is for tests and cmd/mockllm only", p.ImportPath, imp)
			}
		}
	}
	out, err := exec.Command("go", "list", "-deps", "gatehouse/cmd/gatehouse").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	if strings.Contains(string(out), emulator) {
		t.Error("the gatehouse binary links the emulator")
	}
	if !strings.Contains(string(out), "gatehouse/internal/provider/demo") {
		t.Error("the gatehouse binary lacks the demo model: is the dependency list read right?")
	}
}

// TestNoDriversBelowTheRoot extends the request-path rule to the server,
// the tokenizer and the config: each declares what it needs and the
// composition root hands it a store, so none can reach a database.
func TestNoDriversBelowTheRoot(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, layer := range []string{"server", "tokens", "config"} {
			if p.ImportPath != "gatehouse/internal/"+layer && !strings.HasPrefix(p.ImportPath, "gatehouse/internal/"+layer+"/") {
				continue
			}
			for _, imp := range p.Imports {
				for _, d := range databaseDrivers {
					if strings.HasPrefix(imp, d) {
						t.Errorf("%s imports %s: only stores and the composition root may", p.ImportPath, imp)
					}
				}
			}
		}
	}
}

// TestLimitIsStandardLibraryOnly holds internal/limit to its doc: the
// token buckets and budgets are plain code over the standard library, so
// the same algorithm runs in-process and is mirrored in the Redis script.
func TestLimitIsStandardLibraryOnly(t *testing.T) {
	seen := false
	for _, p := range listPackages(t) {
		if p.ImportPath != "gatehouse/internal/limit" {
			continue
		}
		seen = true
		for _, imp := range p.Imports {
			if !isStd(imp) {
				t.Errorf("internal/limit imports %s: it may use the standard library only", imp)
			}
		}
	}
	if !seen {
		t.Fatal("internal/limit not found")
	}
}
