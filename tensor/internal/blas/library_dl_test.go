//go:build (linux || darwin || freebsd || netbsd) && !android && (amd64 || arm64)

package blas

import (
	"os"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestOpenBLASThreads: OpenBLAS's pool is pinned to one thread, and the
// OPENBLAS_NUM_THREADS set for loading does not outlive the load.
func TestOpenBLASThreads(t *testing.T) {
	b := discovered()
	if b.lib == nil || b.lib.kind != "openblas" {
		t.Skipf("needs OpenBLAS: %s", b.reason)
	}
	get := b.lib.sym("openblas_get_num_threads")
	require.NotZero(t, get)
	require.Equal(t, uintptr(1), call(get))

	v, set := os.LookupEnv("OPENBLAS_NUM_THREADS")
	restore := loadEnv()
	require.Equal(t, map[bool]string{true: v, false: "1"}[set], os.Getenv("OPENBLAS_NUM_THREADS"))
	restore()
	after, setAfter := os.LookupEnv("OPENBLAS_NUM_THREADS")
	require.Equal(t, set, setAfter)
	require.Equal(t, v, after)
}

// TestCString reads C strings the library hands back.
func TestCString(t *testing.T) {
	require.Equal(t, "", cString(0))
	b := []byte("OpenBLAS 0.3.21\x00junk")
	require.Equal(t, "OpenBLAS 0.3.21", cStringOf(b))
}

func cStringOf(b []byte) string {
	s := cString(uintptr(unsafe.Pointer(&b[0])))
	runtime.KeepAlive(b)
	return s
}
