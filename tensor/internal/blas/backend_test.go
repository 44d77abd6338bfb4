package blas

import (
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDiscoverSystem: a library that is installed must also be usable.
// Discovery skips a library that fails to bind or fails its self-test,
// and the conformance suite would then skip the library path quietly;
// this test turns that into a failure.
func TestDiscoverSystem(t *testing.T) {
	b := discovered()
	if b.lib == nil {
		require.NotContains(t, b.reason, "no usable BLAS library", "a library is installed but unusable")
		t.Skipf("no BLAS library: %s", b.reason)
	}
	l := b.lib
	require.NotZero(t, l.sgemm)
	require.NotZero(t, l.dgemm)
	require.True(t, l.pinned, "the library's thread pool is not held at one thread")
	_, err := os.Stat(l.path)
	require.NoError(t, err, "the reported library file does not exist")
	old := useBackend(b)
	defer useBackend(old)
	desc := Backend()
	require.Contains(t, desc, l.path)
	require.Regexp(t, regexp.MustCompile(`, \d+ threads$`), desc)
	if l.kind == "openblas" {
		require.Regexp(t, regexp.MustCompile(`^openblas \d+\.\d+\.\d+ \(`), desc)
	}
	t.Log(desc)
}

func TestDiscoverOverride(t *testing.T) {
	t.Run("gonum", func(t *testing.T) {
		for _, v := range []string{"gonum", "go", " Gonum "} {
			t.Setenv(envVar, v)
			l, reason := discover()
			require.Nil(t, l)
			require.Equal(t, "forced by STRATA_BLAS="+strings.TrimSpace(v), reason)
		}
	})
	if !canLoad {
		t.Skipf("no library loading on %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	t.Run("missing file", func(t *testing.T) {
		path := t.TempDir() + "/libnothere.so"
		t.Setenv(envVar, path)
		l, reason := discover()
		require.Nil(t, l)
		require.True(t, strings.HasPrefix(reason, "STRATA_BLAS="+path+": "), reason)
		require.NotContains(t, reason, "\n")
	})
	t.Run("not a library", func(t *testing.T) {
		path := t.TempDir() + "/libjunk.so"
		require.NoError(t, os.WriteFile(path, []byte("not an ELF file"), 0o644))
		t.Setenv(envVar, path)
		l, reason := discover()
		require.Nil(t, l)
		require.Contains(t, reason, "STRATA_BLAS="+path+": ")
	})
	t.Run("no gemm symbols", func(t *testing.T) {
		libm := "libm.so.6"
		if runtime.GOOS == "darwin" {
			libm = "/usr/lib/libSystem.B.dylib"
		}
		t.Setenv(envVar, libm)
		l, reason := discover()
		require.Nil(t, l)
		require.Equal(t, "STRATA_BLAS="+libm+": no symbol sgemm_", reason)
	})
	t.Run("library path", func(t *testing.T) {
		sys := discovered()
		if sys.lib == nil {
			t.Skipf("no BLAS library: %s", sys.reason)
		}
		t.Setenv(envVar, sys.lib.path)
		l, reason := discover()
		require.Empty(t, reason)
		require.NotNil(t, l)
		require.Equal(t, sys.lib.path, l.path)
	})
}

func TestBackendFallbackDescription(t *testing.T) {
	old := useBackend(gonumBackend("forced by test"))
	defer useBackend(old)
	withThreads(3, func() {
		require.Equal(t, "gonum (forced by test), 3 threads", Backend())
	})
}

func TestSetThreads(t *testing.T) {
	old := threadSetting.Load()
	defer threadSetting.Store(old)
	SetThreads(5)
	require.Equal(t, 5, threads())
	SetThreads(0)
	require.Equal(t, runtime.GOMAXPROCS(0), threads())
	SetThreads(-3)
	require.Equal(t, runtime.GOMAXPROCS(0), threads())
}

// TestFallbackChoice: without a library, float32 runs on the own kernel
// where the CPU has it, unless STRATA_BLAS=gonum asks for gonum alone.
func TestFallbackChoice(t *testing.T) {
	t.Setenv(envVar, "go")
	b := fallbackBackend("forced by STRATA_BLAS=go")
	require.Equal(t, bestKernel, b.kernel)
	if !haveKernel {
		require.Equal(t, "forced by STRATA_BLAS=go; "+noKernel, b.reason)
	}
	t.Setenv(envVar, " GONUM ")
	require.Nil(t, fallbackBackend("forced").kernel)

	old := useBackend(ownBackend("forced by test", goKernels[0]))
	defer useBackend(old)
	withThreads(2, func() {
		require.Equal(t, "go (Go 6×16 kernel, float64 on gonum; forced by test), 2 threads", Backend())
	})
}
