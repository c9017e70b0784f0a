package deploy

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRelease runs scripts/release for this machine's platform only (the
// others differ in GOOS and GOARCH alone) and checks what it publishes:
// the archive's files, SHA256SUMS, the SBOM against go version -m of the
// binary, and the binary's own --version.
func TestRelease(t *testing.T) {
	out := t.TempDir()
	const epoch = 1767323045 // 2026-01-02T03:04:05Z
	cmd := exec.Command(filepath.Join(root, "scripts", "release"), out)
	cmd.Env = append(os.Environ(), "TARGETS="+runtime.GOOS+"/"+runtime.GOARCH,
		"VERSION="+testVersion, "COMMIT="+testCommit, "SOURCE_DATE_EPOCH=1767323045")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release: %v\n%s", err, b)
	}
	name := "gatehouse_" + testVersion + "_" + runtime.GOOS + "_" + runtime.GOARCH
	archive, sbom := name+".tar.gz", name+".spdx.json"

	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	if diff := cmp.Diff([]string{"SHA256SUMS", sbom, archive}, files); diff != "" {
		t.Errorf("files published (-want +got):\n%s", diff)
	}

	// SHA256SUMS: one line per file, each sum right.
	sums := map[string]string{}
	f, err := os.Open(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q: want SUM  FILE", sc.Text())
		}
		sums[file] = sum
	}
	for _, file := range []string{archive, sbom} {
		if got := sha256File(t, filepath.Join(out, file)); sums[file] != got {
			t.Errorf("SHA256SUMS says %s of %s, the file's is %s", sums[file], file, got)
		}
	}
	if len(sums) != 2 {
		t.Errorf("SHA256SUMS lists %d files, want 2", len(sums))
	}

	// The archive: one folder named like it, the binary executable, the
	// README (and a LICENSE when the repository has one), all owned by 0
	// and dated SOURCE_DATE_EPOCH.
	bin := filepath.Join(t.TempDir(), "gatehouse")
	want := []string{name + "/", name + "/README.md", name + "/gatehouse"}
	if _, err := os.Stat(filepath.Join(root, "LICENSE")); err == nil {
		want = append(want, name+"/LICENSE")
	}
	var got []string
	for _, h := range readTarGz(t, filepath.Join(out, archive), bin) {
		got = append(got, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(epoch, 0)) {
			t.Errorf("%s: owner %d:%d, time %v: want 0:0 at SOURCE_DATE_EPOCH", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Name == name+"/gatehouse" && h.Mode&0o111 != 0o111 {
			t.Errorf("the binary's mode is %o, want executable", h.Mode)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("archive entries (-want +got):\n%s", diff)
	}
	checkStatic(t, bin)
	v, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), testVersion) || !strings.Contains(string(v), testCommit) {
		t.Errorf("the archive's gatehouse --version = %q (%v), want %s and %s", v, err, testVersion, testCommit)
	}

	checkSBOM(t, filepath.Join(out, sbom), bin, name)
}

// checkSBOM holds the SPDX document to the binary: its checksum, version
// and commit, and exactly the modules go version -m lists.
func checkSBOM(t *testing.T, path, bin, name string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		SPDXVersion  string `json:"spdxVersion"`
		Name         string `json:"name"`
		CreationInfo struct{ Created string }
		Packages     []struct {
			SPDXID      string `json:"SPDXID"`
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
			Comment     string `json:"comment"`
			Checksums   []struct{ Algorithm, ChecksumValue string }
		} `json:"packages"`
		Relationships []struct {
			Element string `json:"spdxElementId"`
			Type    string `json:"relationshipType"`
			Related string `json:"relatedSpdxElement"`
		} `json:"relationships"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the SBOM is not JSON: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.Name != name || doc.CreationInfo.Created != "2026-01-02T03:04:05Z" {
		t.Errorf("SBOM header: %s %s created %s", doc.SPDXVersion, doc.Name, doc.CreationInfo.Created)
	}
	if len(doc.Packages) < 2 {
		t.Fatalf("the SBOM has %d packages", len(doc.Packages))
	}
	main := doc.Packages[0]
	if main.VersionInfo != testVersion || !strings.Contains(main.Comment, testCommit) ||
		len(main.Checksums) != 1 || main.Checksums[0].Algorithm != "SHA256" || main.Checksums[0].ChecksumValue != sha256File(t, bin) {
		t.Errorf("the SBOM's binary: %+v, want version %s, commit %s and the binary's SHA-256", main, testVersion, testCommit)
	}

	// go version -m: "dep PATH VERSION SUM", or a replacement on "=>".
	m, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	want := map[string]bool{}
	goVersion, last := "", ""
	for i, line := range strings.Split(string(m), "\n") {
		f := strings.Fields(line)
		switch {
		case i == 0 && len(f) == 2:
			goVersion = f[1]
		case len(f) >= 3 && f[0] == "dep":
			last = f[1] + "@" + f[2]
			want[last] = true
		case len(f) >= 3 && f[0] == "=>": // the replacement of the dep above
			delete(want, last)
			want[f[1]+"@"+f[2]] = true
		}
	}
	want["stdlib@"+goVersion] = true
	got := map[string]bool{}
	for _, p := range doc.Packages[1:] {
		got[p.Name+"@"+p.VersionInfo] = true
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SBOM modules vs go version -m (-want +got):\n%s", diff)
	}
	if len(want) < 10 {
		t.Errorf("go version -m lists only %d modules: is this gatehouse?", len(want))
	}
	deps := 0
	for _, r := range doc.Relationships {
		if r.Element == main.SPDXID && r.Type == "DEPENDS_ON" {
			deps++
		}
	}
	if deps != len(doc.Packages)-1 {
		t.Errorf("%d DEPENDS_ON relationships for %d modules", deps, len(doc.Packages)-1)
	}
}

// readTarGz lists a .tar.gz's headers and writes the file named
// gatehouse in it to bin.
func readTarGz(t *testing.T, path, bin string) []*tar.Header {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var hs []*tar.Header
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs
		}
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		if filepath.Base(h.Name) == "gatehouse" && h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bin, data, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
