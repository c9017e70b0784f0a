// Package web holds the dashboard's built assets (dist/, made by `make ui`
// from web/src and committed, so building gatehouse needs no Node.js).
// internal/ui serves them under /ui/.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist is the built dashboard: index.html at its root, hashed bundles
// under assets/.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // "dist" is a valid path: fs.Sub cannot fail on it
	}
	return sub
}
