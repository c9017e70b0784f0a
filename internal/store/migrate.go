package store

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change, read from a file named
// "NNNN_what.sql" in a backend's embedded migrations folder.
type Migration struct {
	Version int
	Name    string // the file name, recorded with the version for people
	SQL     string
}

// Migrations reads the migration files in dir of fsys, ordered by version.
// Versions must run 1, 2, 3 … without gaps or repeats: a gap usually means
// a file was lost in a merge, and applying around it would leave a schema
// no release ever had.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_what.sql", name)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d (versions run 1, 2, 3 … without gaps)", m.Name, i+1)
		}
	}
	return ms, nil
}

// Pending returns the migrations after version current, or an error when
// the database was migrated by a newer binary: running old code on a
// newer schema could write records the newer code misreads.
func Pending(ms []Migration, current int) ([]Migration, error) {
	if current > len(ms) {
		return nil, fmt.Errorf("database schema is at version %d, newer than this binary knows (%d): upgrade gatehouse", current, len(ms))
	}
	return ms[current:], nil
}
