package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts writing a CPU profile of the whole process to
// path (gatehouse serve --cpuprofile, for the load benchmark's profiles
// per scenario) and returns the function that stops it and closes the
// file. It fails before the gateway starts, so a benchmark never runs
// for minutes to find its profile missing.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		return nil
	}, nil
}
