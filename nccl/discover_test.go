package nccl

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestDiscoveryBogusOverride(t *testing.T) {
	if !platformSupported {
		t.Skip("linux only")
	}
	_, err := load(env(map[string]string{EnvNCCLLib: "/nonexistent/libnccl.so.2"}), nil)
	require.ErrorIs(t, err, ErrNotAvailable)
	msg := err.Error()
	assert.Contains(t, msg, "nccl: cannot load NCCL (libnccl) from STRATA_NCCL_LIB=/nonexistent/libnccl.so.2")
	assert.Contains(t, msg, "tried /nonexistent/libnccl.so.2 (")
	assert.Contains(t, msg, "No such file")
	assert.Contains(t, msg, "point STRATA_NCCL_LIB at the library file, or unset it")
}

// A library that loads but is not NCCL (libc here) is named, with the
// functions it lacks.
func TestDiscoveryWrongLibrary(t *testing.T) {
	if !platformSupported {
		t.Skip("linux only")
	}
	if _, err := dlopen("libc.so.6"); err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	_, err := load(env(map[string]string{EnvNCCLLib: "libc.so.6"}), nil)
	require.ErrorIs(t, err, ErrNotAvailable)
	assert.Contains(t, err.Error(), "nccl: libc.so.6 is not NCCL 2.x: it lacks ncclGetVersion, ncclGetUniqueId, ncclCommInitRank")
	assert.Contains(t, err.Error(), "set STRATA_NCCL_LIB to the full path of libnccl.so.2")
}

func TestDiscoverySearchOrderAndReport(t *testing.T) {
	if !platformSupported {
		t.Skip("linux only")
	}
	dir := t.TempDir()
	// A file that exists but is no library: its loader error is reported.
	junk := filepath.Join(dir, "libstrata-missing.so.2")
	require.NoError(t, os.WriteFile(junk, []byte("not an ELF file"), 0o644))
	names := []string{"libstrata-missing.so.2", "libstrata-missing.so"}
	_, _, err := openLibrary(env(nil), names, []string{filepath.Join(dir, "absent"), dir})
	require.ErrorIs(t, err, ErrNotAvailable)
	var le *loadError
	require.True(t, errors.As(err, &le))
	require.Len(t, le.Tried, 3, "two sonames, then the one file found in the folders")
	assert.Equal(t, names[0], le.Tried[0].Path)
	assert.Equal(t, names[1], le.Tried[1].Path)
	assert.Equal(t, junk, le.Tried[2].Path)
	assert.NotEmpty(t, le.Tried[2].Err)
	assert.Contains(t, err.Error(), "nccl: cannot load NCCL (libnccl): tried libstrata-missing.so.2 (")
	assert.Contains(t, err.Error(), ": install NCCL 2.x")
}

func TestDiscoveryDefaultFolders(t *testing.T) {
	t.Setenv("NCCL_HOME", "/opt/nccl")
	dirs := libDirs()
	require.NotEmpty(t, dirs)
	assert.Equal(t, "/opt/nccl/lib64", dirs[0])
	assert.Equal(t, "/opt/nccl/lib", dirs[1])
	assert.Contains(t, dirs, "/usr/local/cuda/lib64")
	assert.Contains(t, dirs, "/usr/lib/"+archTriplet())
	assert.Equal(t, []string{"libnccl.so.2", "libnccl.so"}, libNames)
}

// Without NCCL installed (this development machine, CI) every entry
// point returns the discovery error, the same one from every goroutine,
// before touching any argument NCCL would read.
func TestMissingLibrary(t *testing.T) {
	if Available() {
		t.Skip("NCCL is installed here")
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = Init() })
	}
	wg.Wait()
	for _, err := range errs {
		require.ErrorIs(t, err, ErrNotAvailable)
		assert.Same(t, errs[0], err, "loaded once")
	}
	msg := errs[0].Error()
	if os.Getenv(EnvNCCLLib) == "" {
		assert.Contains(t, msg, "tried libnccl.so.2 (")
		assert.Contains(t, msg, "set STRATA_NCCL_LIB")
	}
	_, err := Version()
	assert.ErrorIs(t, err, ErrNotAvailable)
	_, err = LibraryPath()
	assert.ErrorIs(t, err, ErrNotAvailable)
	_, err = GetUniqueID()
	assert.ErrorIs(t, err, ErrNotAvailable)
	_, err = CommInitRank(1, UniqueID{1}, 0)
	assert.ErrorIs(t, err, ErrNotAvailable)
	_, err = CommInitAll([]int{0})
	assert.ErrorIs(t, err, ErrNotAvailable)
	assert.ErrorIs(t, GroupStart(), ErrNotAvailable)
	assert.ErrorIs(t, GroupEnd(), ErrNotAvailable)
	assert.ErrorIs(t, Group(func() error { t.Error("fn ran without NCCL"); return nil }), ErrNotAvailable)
}
