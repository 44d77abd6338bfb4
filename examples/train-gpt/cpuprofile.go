package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts a Go CPU profile of the run into path (-cpuprofile)
// and returns what stops it and closes the file, with the first error of
// its writes or of the close (runtime/pprof drops its write errors). Where
// a GPU step is bound by the host (graph building, allocation, kernel
// launches) rather than by its kernels, the profile says which of them;
// time the host spends waiting for the device shows as the driver's
// synchronizing calls.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	out := wrapOutput(f)
	w := &firstErrWriter{w: out}
	if err := pprof.StartCPUProfile(w); err != nil {
		out.Close()
		return nil, fmt.Errorf("-cpuprofile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		err := w.err
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("-cpuprofile %s: %w", path, err)
		}
		return nil
	}, nil
}
