package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts a Go CPU profile of the run into path (-cpuprofile)
// and returns what stops it and closes the file. Where a GPU step is
// bound by the host (graph building, allocation, kernel launches) rather
// than by its kernels, the profile says which of them; time the host
// spends waiting for the device shows as the driver's synchronizing
// calls.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "-cpuprofile %s: %v\n", path, err)
		}
	}, nil
}
