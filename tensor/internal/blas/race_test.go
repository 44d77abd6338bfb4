//go:build race

package blas

// raceEnabled: the race detector makes sync.Pool drop items on purpose,
// so allocation counts mean nothing under it.
const raceEnabled = true
