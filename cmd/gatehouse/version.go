package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// buildVersion says which gatehouse this is.
type buildVersion struct {
	Version string // a release tag, a pseudo-version, or "dev"
	Commit  string // the full VCS revision, "-dirty" appended for a modified tree; "unknown" when not recorded
	Go      string // the toolchain that built it
}

func (b buildVersion) String() string {
	return fmt.Sprintf("gatehouse %s (commit %s, %s %s/%s)", b.Version, b.Commit, b.Go, runtime.GOOS, runtime.GOARCH)
}

// currentVersion is this binary's version: the stamped values where set,
// else the build information the go command embedded.
func currentVersion() buildVersion {
	info, _ := debug.ReadBuildInfo()
	return resolveVersion(version, commit, info)
}

// resolveVersion prefers the -X values, then the main module's version
// (a tag for go install …@v1.2.0, a pseudo-version for a go build in a
// checkout with Go ≥ 1.24) and vcs.revision. info may be nil.
func resolveVersion(stampedVersion, stampedCommit string, info *debug.BuildInfo) buildVersion {
	b := buildVersion{Version: stampedVersion, Commit: stampedCommit, Go: runtime.Version()}
	if info == nil {
		info = &debug.BuildInfo{}
	}
	if info.GoVersion != "" {
		b.Go = info.GoVersion
	}
	if b.Version == "" {
		b.Version = "dev"
		if v := info.Main.Version; v != "" && v != "(devel)" {
			b.Version = v
		}
	}
	if b.Commit == "" {
		b.Commit = "unknown"
		var modified bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && b.Commit != "unknown" {
			b.Commit += "-dirty"
		}
	}
	return b
}
