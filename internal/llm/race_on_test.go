//go:build race

package llm

// raceEnabled lets single-goroutine tests that scan many megabytes use
// smaller inputs under the race detector, which makes them 40 times
// slower and has nothing more to check in them.
const raceEnabled = true
