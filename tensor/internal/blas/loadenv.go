package blas

import "os"

// loadEnv sets OPENBLAS_NUM_THREADS=1 for the time libraries load, unless
// the user has set it, and returns the function that restores the
// environment. OpenBLAS sizes its thread pool once, while it loads, and
// each pool thread it starts spins for about 2^28 cycles (0.1 s of a
// core) before it sleeps; the package pins the pool to one thread right
// after loading anyway (see doc.go), so a pool would only cost threads
// and that spin.
//
// OPENBLAS_CORETYPE, the other setting OpenBLAS reads while loading, is
// left to the user: OpenBLAS 0.3.21 picks its AVX-512 Cooperlake kernels
// on the Zen 5 development machine by itself, and an OPENBLAS_CORETYPE in
// the environment (this machine's sets Haswell) shows in Backend().
func loadEnv() (restore func()) {
	const name = "OPENBLAS_NUM_THREADS"
	if _, ok := os.LookupEnv(name); ok || os.Setenv(name, "1") != nil {
		return func() {}
	}
	return func() { _ = os.Unsetenv(name) }
}
