// Command sbom writes a software bill of materials for a Go binary, in
// SPDX 2.3 JSON: the binary itself (its version, commit and SHA-256), every
// module linked into it with its version, and the Go toolchain, each with a
// package URL that vulnerability scanners look up. Everything comes from
// the build information the go command embeds in the binary (what
// `go version -m` prints), read with debug/buildinfo, so the list is what
// was linked, not what go.mod allows. scripts/release runs it for each
// archive.
//
//	sbom -binary dist/gatehouse -name gatehouse_v1.2.0_linux_amd64 -version v1.2.0 -commit 3f2a… > x.spdx.json
//
// It imports nothing of gatehouse's.
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "the Go binary to describe")
	flag.StringVar(&o.name, "name", "", "the document's name, e.g. the archive's (default: the binary's file name)")
	flag.StringVar(&o.version, "version", "", "the binary's version (default: its main module's)")
	flag.StringVar(&o.commit, "commit", "", "the commit it was built from (default: its vcs.revision, if recorded)")
	created := flag.String("created", "", "creation time: RFC 3339, or @UNIX seconds as SOURCE_DATE_EPOCH (default: SOURCE_DATE_EPOCH, else now)")
	flag.Parse()
	if o.binary == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: sbom -binary FILE [-name NAME] [-version V] [-commit C] [-created TIME]")
		os.Exit(2)
	}
	if *created == "" {
		if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
			*created = "@" + epoch
		}
	}
	var err error
	if o.created, err = parseCreated(*created, time.Now()); err != nil {
		fail(err)
	}
	if err := run(o, os.Stdout); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sbom:", err)
	os.Exit(1)
}

type options struct {
	binary, name, version, commit string
	created                       time.Time
}

// run reads the binary and writes its document to w.
func run(o options, w io.Writer) error {
	info, err := buildinfo.ReadFile(o.binary)
	if err != nil {
		return fmt.Errorf("%s: %w", o.binary, err)
	}
	data, err := os.ReadFile(o.binary)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	if o.name == "" {
		o.name = baseName(o.binary)
	}
	doc := document(info, o, hex.EncodeToString(sum[:]), baseName(o.binary))
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// parseCreated reads -created; empty means now.
func parseCreated(s string, now time.Time) (time.Time, error) {
	switch {
	case s == "":
		return now.UTC().Truncate(time.Second), nil
	case strings.HasPrefix(s, "@"):
		sec, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("-created %q: want @UNIX seconds", s)
		}
		return time.Unix(sec, 0).UTC(), nil
	default:
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("-created %q: want RFC 3339 or @UNIX seconds", s)
		}
		return t.UTC(), nil
	}
}

func baseName(path string) string {
	return path[strings.LastIndexAny(path, `/\`)+1:]
}

// The SPDX 2.3 JSON fields this tool writes.
type (
	spdxDocument struct {
		SPDXVersion       string             `json:"spdxVersion"`
		DataLicense       string             `json:"dataLicense"`
		SPDXID            string             `json:"SPDXID"`
		Name              string             `json:"name"`
		DocumentNamespace string             `json:"documentNamespace"`
		CreationInfo      spdxCreationInfo   `json:"creationInfo"`
		Packages          []spdxPackage      `json:"packages"`
		Relationships     []spdxRelationship `json:"relationships"`
	}
	spdxCreationInfo struct {
		Created  string   `json:"created"`
		Creators []string `json:"creators"`
	}
	spdxPackage struct {
		SPDXID                string         `json:"SPDXID"`
		Name                  string         `json:"name"`
		VersionInfo           string         `json:"versionInfo,omitempty"`
		PackageFileName       string         `json:"packageFileName,omitempty"`
		Supplier              string         `json:"supplier"`
		DownloadLocation      string         `json:"downloadLocation"`
		FilesAnalyzed         bool           `json:"filesAnalyzed"`
		Checksums             []spdxChecksum `json:"checksums,omitempty"`
		LicenseConcluded      string         `json:"licenseConcluded"`
		LicenseDeclared       string         `json:"licenseDeclared"`
		CopyrightText         string         `json:"copyrightText"`
		PrimaryPackagePurpose string         `json:"primaryPackagePurpose,omitempty"`
		Comment               string         `json:"comment,omitempty"`
		ExternalRefs          []spdxExtRef   `json:"externalRefs,omitempty"`
	}
	spdxChecksum struct {
		Algorithm     string `json:"algorithm"`
		ChecksumValue string `json:"checksumValue"`
	}
	spdxExtRef struct {
		ReferenceCategory string `json:"referenceCategory"`
		ReferenceType     string `json:"referenceType"`
		ReferenceLocator  string `json:"referenceLocator"`
	}
	spdxRelationship struct {
		Element string `json:"spdxElementId"`
		Type    string `json:"relationshipType"`
		Related string `json:"relatedSpdxElement"`
	}
)

// noAssertion is SPDX's "this document does not say": licenses are not
// in the build information, and guessing them would be worse than saying
// nothing.
const noAssertion = "NOASSERTION"

// document describes the binary of info: sha256 is its checksum, file its
// file name.
func document(info *debug.BuildInfo, o options, sha256, file string) spdxDocument {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	version := o.version
	if version == "" {
		version = info.Main.Version
	}
	commit := o.commit
	if commit == "" {
		commit = settings["vcs.revision"]
	}
	comment := fmt.Sprintf("Go binary for %s/%s built with %s, CGO_ENABLED=%s", settings["GOOS"], settings["GOARCH"], info.GoVersion, settings["CGO_ENABLED"])
	if commit != "" {
		comment += ", from commit " + commit
	}
	main := pkg("SPDXRef-Package-"+spdxID(info.Main.Path), info.Main.Path, version, info.Main.Path, "")
	main.PackageFileName = file
	main.Checksums = []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: sha256}}
	main.PrimaryPackagePurpose = "APPLICATION"
	main.Comment = comment

	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3",
		DataLicense: "CC0-1.0",
		SPDXID:      "SPDXRef-DOCUMENT",
		Name:        o.name,
		// Unique per binary: the same name and bytes give the same document.
		DocumentNamespace: "https://spdx.org/spdxdocs/" + o.name + "-" + sha256,
		CreationInfo: spdxCreationInfo{
			Created:  o.created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: gatehouse-sbom (debug/buildinfo, " + info.GoVersion + ")"},
		},
		Packages:      []spdxPackage{main},
		Relationships: []spdxRelationship{{"SPDXRef-DOCUMENT", "DESCRIBES", main.SPDXID}},
	}
	seen := map[string]bool{main.SPDXID: true}
	add := func(p spdxPackage) {
		// Two module paths can map to one identifier (a/b-c, a-b/c).
		for id, n := p.SPDXID, 2; seen[p.SPDXID]; n++ {
			p.SPDXID = id + "-" + strconv.Itoa(n)
		}
		seen[p.SPDXID] = true
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{main.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	add(pkg("SPDXRef-Package-stdlib-"+spdxID(info.GoVersion), "stdlib", info.GoVersion, "stdlib", "the Go standard library and runtime"))
	for _, dep := range info.Deps {
		m, note := dep, ""
		if dep.Replace != nil {
			m, note = dep.Replace, "replaces "+dep.Path+"@"+dep.Version
		}
		if m.Sum != "" {
			note = strings.TrimPrefix(note+"; go.sum "+m.Sum, "; ")
		}
		add(pkg("SPDXRef-Package-go-"+spdxID(m.Path+"-"+m.Version), m.Path, m.Version, m.Path, note))
	}
	return doc
}

// pkg is a Go module as an SPDX package, found by its package URL.
func pkg(id, name, version, purlPath, comment string) spdxPackage {
	purl := "pkg:golang/" + purlPath
	if version != "" && version != "(devel)" {
		purl += "@" + version
	}
	return spdxPackage{
		SPDXID: id, Name: name, VersionInfo: version,
		Supplier: noAssertion, DownloadLocation: noAssertion,
		LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
		Comment:      comment,
		ExternalRefs: []spdxExtRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: purl}},
	}
}

// spdxID turns s into the characters an SPDX identifier allows (letters,
// digits, "." and "-").
func spdxID(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			return r
		}
		return '-'
	}, s)
}
