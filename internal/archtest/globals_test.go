package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// packageVarAllowList names the package-level variables allowed outside
// tests ("dir/file.go name"), each with why it is not mutable state in
// practice. Everything else at package level must be a const, a func or
// a type: DESIGN.md's "no package-level mutable state".
func packageVarAllowList() map[string]string {
	const (
		lookup  = "a read-only lookup table on the request path: a func would build it per call"
		columns = "a read-only table of a CLI's or the admin API's columns and fields"
		wire    = "read-only bytes or headers written as they are, so the hot path does not allocate them per request"
		shape   = "a read-only description of a wire format (allowed media types, ignored or refused fields)"
		buckets = "Prometheus histogram buckets and descriptors, fixed for the process"
	)
	return map[string]string{
		"cmd/gatehouse/main.go version":                          "set by the linker (-ldflags -X), never written at run time",
		"cmd/gatehouse/main.go commit":                           "set by the linker (-ldflags -X), never written at run time",
		"cmd/gatehouse/cli_commands.go customerColumns":          columns,
		"cmd/gatehouse/cli_commands.go customerFieldOrder":       columns,
		"cmd/gatehouse/cli_commands.go keyColumns":               columns,
		"cmd/gatehouse/cli_commands.go keyFields":                columns,
		"cmd/gatehouse/cli_commands.go projectColumns":           columns,
		"cmd/gatehouse/cli_commands.go projectFieldOrder":        columns,
		"cmd/gatehouse/cli_prices.go priceColumns":               columns,
		"cmd/gatehouse/cli_prices.go priceFields":                columns,
		"cmd/gatehouse/cli_usage.go logColumns":                  columns,
		"cmd/gatehouse/cli_usage.go recordFields":                columns,
		"internal/admin/customers.go customerFields":             columns,
		"internal/admin/projects.go projectFields":               columns,
		"internal/admin/usage.go csvColumns":                     columns,
		"internal/admin/usage.go filterParams":                   columns,
		"internal/admin/usage.go logParams":                      columns,
		"internal/admin/usage.go usageParams":                    columns,
		"internal/account/latency.go latencyMantissas":           "the R20 preferred numbers the histogram's bounds are made of: a fixed table",
		"internal/account/latency.go latencyBounds":              "the histogram's fixed bucket bounds, computed once from latencyMantissas and never written",
		"internal/account/redact.go builtinRules":                "the built-in redaction patterns, compiled into each Redactor",
		"internal/cache/key.go ignored":                          shape,
		"internal/messages/request.go ignored":                   shape,
		"internal/messages/request.go refused":                   shape,
		"internal/responses/request.go ignored":                  shape,
		"internal/responses/request.go refused":                  shape,
		"internal/provider/anthropic/request.go imageMediaTypes": shape,
		"internal/provider/bedrock/request.go imageFormats":      shape,
		"internal/provider/bedrock/stream.go exceptionStatus":    shape,
		"internal/provider/gemini/request.go imageMIME":          shape,
		"internal/llm/scan.go strStop":                           lookup,
		"internal/tokens/estimate.go asciiClass":                 lookup,
		"internal/tokens/scan.go automaton":                      lookup,
		"internal/tokens/scan.go escapeByte":                     lookup,
		"internal/store/postgres/usage_copy.go copySpecial":      lookup,
		"internal/tokens/price.go bedrockRegions":                lookup,
		"internal/tokens/price.go bedrockVendors":                lookup,
		"internal/server/cache.go cacheHeader":                   wire,
		"internal/server/admit.go quotaHeaderKeys":               wire,
		"internal/server/exchange.go jsonContentType":            wire,
		"internal/server/admit.go costTrailer":                   wire,
		"internal/store/sqlite/batch_codec.go noRecord":          "the empty record a batch's first is compared with, only ever read",
		"internal/llm/sse.go bom":                                wire,
		"internal/stream/relay.go doneEvent":                     wire,
		"internal/server/messages.go missingKeyAnthropic":        "a sentinel error value, like errors.New's",
		"internal/metrics/load.go inFlightRequestsDesc":          buckets,
		"internal/metrics/load.go inFlightTokensDesc":            buckets,
		"internal/metrics/metrics.go latencyBuckets":             buckets,
		"internal/metrics/metrics.go overheadBuckets":            buckets,
		"internal/store/postgres/usage_read.go bucketWidths":     lookup,
		"internal/store/sqlite/usage_read.go bucketMicros":       lookup,
		"internal/store/sqlite/usage_write.go insertSizes":       "the fixed batch sizes of prepared multi-row inserts",
		"internal/store/redis/cache.go purgeScript":              "a rueidis Lua script: immutable, caches its SHA for EVALSHA",
		"internal/store/redis/cache.go putScript":                "a rueidis Lua script: immutable, caches its SHA for EVALSHA",
		"internal/store/store.go idEncoding":                     "a stateless base32 alphabet, safe for concurrent use",
		"internal/store/storetest/usage_bench.go BenchEnd":       "test support: the fixed end of the benchmarks' synthetic history",
		"internal/tokens/override.go emptyOverlay":               "the shared empty value of an atomic pointer, never written through",
		"internal/tokens/genprices/main.go providers":            "a generator's input list (go run, not the gateway)",
	}
}

// allowedPackage reports whether a file belongs to a package whose
// package-level tables are allowed wholesale: the provider emulator,
// which is test support, not the gateway (archtest keeps it out of the
// binary), and whose tables are its fixtures of six wire formats.
func allowedPackage(file string) bool {
	return strings.HasPrefix(file, "internal/mockllm/")
}

// immutableByRule reports whether a package-level var is one of the
// idioms that hold no state:
//   - sentinel errors (names starting err or Err): errors.New, fmt.Errorf
//     or an error struct's address, compared with errors.Is;
//   - //go:embed contents, which the compiler fills and nothing writes;
//   - sync.Pool values, a concurrency-safe cache of scratch buffers.
func immutableByRule(d *ast.GenDecl, vs *ast.ValueSpec) bool {
	for _, doc := range []*ast.CommentGroup{d.Doc, vs.Doc} {
		if doc != nil && strings.Contains(doc.Text(), "go:embed") {
			return true
		}
		if doc != nil {
			for _, c := range doc.List {
				if strings.HasPrefix(c.Text, "//go:embed") {
					return true
				}
			}
		}
	}
	if sel, ok := vs.Type.(*ast.SelectorExpr); ok && isIdent(sel.X, "sync") && sel.Sel.Name == "Pool" {
		return true
	}
	if len(vs.Values) == 0 {
		return false
	}
	sentinel := true // every name says it is an error
	for _, id := range vs.Names {
		sentinel = sentinel && (strings.HasPrefix(id.Name, "err") || strings.HasPrefix(id.Name, "Err"))
	}
	for _, v := range vs.Values {
		if u, ok := v.(*ast.UnaryExpr); ok && u.Op == token.AND && sentinel {
			v = u.X // &llm.Error{…}: a sentinel error value
		}
		switch e := v.(type) {
		case *ast.CallExpr:
			sel, ok := e.Fun.(*ast.SelectorExpr)
			if !ok || !(isIdent(sel.X, "errors") && sel.Sel.Name == "New" || isIdent(sel.X, "fmt") && sel.Sel.Name == "Errorf") {
				return false
			}
		case *ast.CompositeLit:
			sel, ok := e.Type.(*ast.SelectorExpr)
			pool := ok && isIdent(sel.X, "sync") && sel.Sel.Name == "Pool"
			if !pool && !sentinel {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// moduleRoot is the module's directory, two up from this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// sourceFiles parses every non-test Go file of the module (not bench/,
// its own module; not testdata).
func sourceFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	root := moduleRoot(t)
	files := map[string]*ast.File{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "bench" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = f
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 50 {
		t.Fatalf("found only %d source files under %s", len(files), root)
	}
	return files
}

// TestNoInitAndNoPackageState checks on the syntax tree that no package
// has an init function or a package-level variable outside the
// allow-list. Compile-time interface checks (var _ I = T{}) are not
// state and pass.
func TestNoInitAndNoPackageState(t *testing.T) {
	allowed := packageVarAllowList()
	var found []string
	for name, f := range sourceFiles(t) {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == "init" {
					t.Errorf("%s: func init: register explicitly from the composition root instead", name)
				}
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, spec := range d.Specs {
					vs := spec.(*ast.ValueSpec)
					if immutableByRule(d, vs) || allowedPackage(name) {
						continue
					}
					for _, id := range vs.Names {
						if id.Name == "_" {
							continue
						}
						key := name + " " + id.Name
						if _, ok := allowed[key]; !ok {
							found = append(found, key)
						}
					}
				}
			}
		}
	}
	sort.Strings(found)
	for _, k := range found {
		t.Errorf("package-level variable %s: make it a const, a func or a field, or allow-list it with a reason", k)
	}
}
