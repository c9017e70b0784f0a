//go:build race

package llm

// raceEnabled lets single-goroutine tests that scan many megabytes skip
// under the race detector, which makes them 40 times slower and has
// nothing to check there.
const raceEnabled = true
