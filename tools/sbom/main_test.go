package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDocument(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.26.1",
		Path:      "gatehouse/cmd/gatehouse",
		Main:      debug.Module{Path: "gatehouse", Version: "(devel)"},
		Deps: []*debug.Module{
			{Path: "github.com/a/b-c", Version: "v1.0.0", Sum: "h1:abc="},
			{Path: "github.com/a-b/c", Version: "v1.0.0"},
			{Path: "example.com/old", Version: "v0.1.0", Replace: &debug.Module{Path: "example.com/new", Version: "v0.2.0", Sum: "h1:new="}},
		},
		Settings: []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}, {Key: "CGO_ENABLED", Value: "0"}},
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	doc := document(info, options{name: "gatehouse_v1_linux_arm64", version: "v1.2.0", commit: "abc123", created: created}, "ff00", "gatehouse")

	ref := func(purl string) []spdxExtRef {
		return []spdxExtRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: purl}}
	}
	na := noAssertion
	want := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              "gatehouse_v1_linux_arm64",
		DocumentNamespace: "https://spdx.org/spdxdocs/gatehouse_v1_linux_arm64-ff00",
		CreationInfo:      spdxCreationInfo{Created: "2026-01-02T03:04:05Z", Creators: []string{"Tool: gatehouse-sbom (debug/buildinfo, go1.26.1)"}},
		Packages: []spdxPackage{
			{SPDXID: "SPDXRef-Package-gatehouse", Name: "gatehouse", VersionInfo: "v1.2.0", PackageFileName: "gatehouse",
				Supplier: na, DownloadLocation: na, LicenseConcluded: na, LicenseDeclared: na, CopyrightText: na,
				Checksums: []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: "ff00"}}, PrimaryPackagePurpose: "APPLICATION",
				Comment:      "Go binary for linux/arm64 built with go1.26.1, CGO_ENABLED=0, from commit abc123",
				ExternalRefs: ref("pkg:golang/gatehouse@v1.2.0")},
			{SPDXID: "SPDXRef-Package-stdlib-go1.26.1", Name: "stdlib", VersionInfo: "go1.26.1",
				Supplier: na, DownloadLocation: na, LicenseConcluded: na, LicenseDeclared: na, CopyrightText: na,
				Comment: "the Go standard library and runtime", ExternalRefs: ref("pkg:golang/stdlib@go1.26.1")},
			{SPDXID: "SPDXRef-Package-go-github.com-a-b-c-v1.0.0", Name: "github.com/a/b-c", VersionInfo: "v1.0.0",
				Supplier: na, DownloadLocation: na, LicenseConcluded: na, LicenseDeclared: na, CopyrightText: na,
				Comment: "go.sum h1:abc=", ExternalRefs: ref("pkg:golang/github.com/a/b-c@v1.0.0")},
			{SPDXID: "SPDXRef-Package-go-github.com-a-b-c-v1.0.0-2", Name: "github.com/a-b/c", VersionInfo: "v1.0.0",
				Supplier: na, DownloadLocation: na, LicenseConcluded: na, LicenseDeclared: na, CopyrightText: na,
				ExternalRefs: ref("pkg:golang/github.com/a-b/c@v1.0.0")},
			{SPDXID: "SPDXRef-Package-go-example.com-new-v0.2.0", Name: "example.com/new", VersionInfo: "v0.2.0",
				Supplier: na, DownloadLocation: na, LicenseConcluded: na, LicenseDeclared: na, CopyrightText: na,
				Comment: "replaces example.com/old@v0.1.0; go.sum h1:new=", ExternalRefs: ref("pkg:golang/example.com/new@v0.2.0")},
		},
		Relationships: []spdxRelationship{
			{"SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Package-gatehouse"},
			{"SPDXRef-Package-gatehouse", "DEPENDS_ON", "SPDXRef-Package-stdlib-go1.26.1"},
			{"SPDXRef-Package-gatehouse", "DEPENDS_ON", "SPDXRef-Package-go-github.com-a-b-c-v1.0.0"},
			{"SPDXRef-Package-gatehouse", "DEPENDS_ON", "SPDXRef-Package-go-github.com-a-b-c-v1.0.0-2"},
			{"SPDXRef-Package-gatehouse", "DEPENDS_ON", "SPDXRef-Package-go-example.com-new-v0.2.0"},
		},
	}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("document (-want +got):\n%s", diff)
	}
}

// TestRunOnARealBinary describes a binary the go command builds: this
// command itself (a test executable records no dependencies).
// deploy/release_test.go checks a gatehouse binary's list against go
// version -m.
func TestRunOnARealBinary(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "sbom")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var out bytes.Buffer
	if err := run(options{binary: exe, version: "v9.9.9", created: time.Unix(0, 0)}, &out); err != nil {
		t.Fatal(err)
	}
	var doc spdxDocument
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("the output is not JSON: %v\n%s", err, out.String())
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	main := doc.Packages[0]
	if main.Name != "gatehouse" || main.VersionInfo != "v9.9.9" || main.PackageFileName != "sbom" ||
		len(main.Checksums) != 1 || main.Checksums[0].ChecksumValue != hex.EncodeToString(sum[:]) {
		t.Errorf("the binary's package: %+v", main)
	}
	if len(doc.Packages) != 2 || doc.Packages[1].VersionInfo != runtime.Version() {
		t.Errorf("packages %+v: want the binary and the standard library of %s", doc.Packages, runtime.Version())
	}
	if err := run(options{binary: filepath.Join(t.TempDir(), "missing")}, &out); err == nil {
		t.Error("no error for a missing binary")
	}
}

func TestParseCreated(t *testing.T) {
	now := time.Date(2026, 5, 6, 7, 8, 9, 500, time.UTC)
	for in, want := range map[string]string{
		"":                          "2026-05-06T07:08:09Z",
		"@1700000000":               "2023-11-14T22:13:20Z",
		"2026-01-02T03:04:05+01:00": "2026-01-02T02:04:05Z",
	} {
		got, err := parseCreated(in, now)
		if err != nil || got.Format(time.RFC3339) != want {
			t.Errorf("parseCreated(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{"@x", "yesterday"} {
		if _, err := parseCreated(bad, now); err == nil {
			t.Errorf("parseCreated(%q): no error", bad)
		}
	}
}
