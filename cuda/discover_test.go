package cuda

import (
	"errors"
	"os"
	"path/filepath"
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
	_, err := loadDriver(env(map[string]string{EnvCUDALib: "/nonexistent/libcuda.so.1"}))
	require.ErrorIs(t, err, ErrNoDriver)
	msg := err.Error()
	assert.Contains(t, msg, "cannot load the CUDA driver library (libcuda) from STRATA_CUDA_LIB=/nonexistent/libcuda.so.1")
	assert.Contains(t, msg, "tried /nonexistent/libcuda.so.1 (")
	assert.Contains(t, msg, "No such file")
	assert.Contains(t, msg, "point STRATA_CUDA_LIB at the library file, or unset it")

	_, err = loadBLAS(env(map[string]string{EnvCUBLASLib: "/nonexistent/libcublas.so.13"}))
	require.ErrorIs(t, err, ErrNoCUBLAS)
	assert.NotErrorIs(t, err, ErrNoDriver)
	assert.Contains(t, err.Error(), "cannot load cuBLAS (libcublas) from STRATA_CUBLAS_LIB=/nonexistent/libcublas.so.13")
}

// A library that loads but is not the driver (libc here) is named, with
// the entry points it lacks.
func TestDiscoveryWrongLibrary(t *testing.T) {
	libcSym(t, "labs") // skips without libc
	_, err := loadDriver(env(map[string]string{EnvCUDALib: "libc.so.6"}))
	require.ErrorIs(t, err, ErrNoDriver)
	assert.Contains(t, err.Error(), "libc.so.6 is not a CUDA driver library: it lacks cuInit, cuDriverGetVersion, cuGetErrorName, cuGetErrorString")
	assert.Contains(t, err.Error(), "install the NVIDIA driver")

	_, err = loadBLAS(env(map[string]string{EnvCUBLASLib: "libc.so.6"}))
	require.ErrorIs(t, err, ErrNoCUBLAS)
	assert.Contains(t, err.Error(), "libc.so.6 lacks cublasCreate_v2, cublasDestroy_v2")
}

func TestDiscoverySearchOrderAndReport(t *testing.T) {
	if !platformSupported {
		t.Skip("linux only")
	}
	dir := t.TempDir()
	// A file that exists but is no library: its loader error is reported.
	junk := filepath.Join(dir, "libstrata-missing.so.1")
	require.NoError(t, os.WriteFile(junk, []byte("not an ELF file"), 0o644))
	spec := libSpec{
		Pkg:   "cuda",
		What:  "the test library",
		Env:   "STRATA_TEST_LIB",
		Names: []string{"libstrata-missing.so.1", "libstrata-missing.so"},
		Dirs:  []string{filepath.Join(dir, "absent"), dir},
		Fix:   "install it",
		Kind:  ErrNoDriver,
	}
	_, _, err := openLibrary(spec, env(nil))
	require.ErrorIs(t, err, ErrNoDriver)
	var le *loadError
	require.True(t, errors.As(err, &le))
	require.Len(t, le.Tried, 3, "two sonames, then the one file found in the directories")
	assert.Equal(t, "libstrata-missing.so.1", le.Tried[0].Path)
	assert.Equal(t, "libstrata-missing.so", le.Tried[1].Path)
	assert.Equal(t, junk, le.Tried[2].Path)
	assert.NotEmpty(t, le.Tried[2].Err)
	assert.Contains(t, err.Error(), "cuda: cannot load the test library: tried libstrata-missing.so.1 (")
	assert.Contains(t, err.Error(), ": install it")

	// A loadable file in a directory is found after the sonames fail.
	libc := "/lib/" + archTriplet() + "/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skipf("no %s", libc)
	}
	spec.Names = []string{"libc.so.6.absent", "libc.so.6"}
	spec.Dirs = []string{filepath.Dir(libc)}
	h, path, err := openLibrary(spec, env(nil))
	require.NoError(t, err)
	assert.NotZero(t, h)
	assert.Equal(t, "libc.so.6", path)
}

func TestSpecsNameTheOverrides(t *testing.T) {
	d := driverSpec()
	assert.Equal(t, []string{"libcuda.so.1", "libcuda.so"}, d.Names)
	assert.Contains(t, d.Fix, "STRATA_CUDA_LIB")
	t.Setenv("CUDA_HOME", "/opt/cuda-test")
	b := cublasSpec()
	assert.Equal(t, []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, b.Names)
	assert.Equal(t, "/opt/cuda-test/lib64", b.Dirs[0])
	assert.Contains(t, b.Dirs, "/usr/local/cuda/lib64")
	assert.Contains(t, b.Fix, "STRATA_CUBLAS_LIB")
	for _, dir := range b.Dirs {
		assert.NotContains(t, dir, "stubs", "never load the toolkit's stub libraries")
	}
}

func TestVersionString(t *testing.T) {
	assert.Equal(t, "13.0", versionString(13000))
	assert.Equal(t, "12.4", versionString(12040))
	assert.Equal(t, "11.8", versionString(11080))
}

// Without a driver every entry point fails cleanly with ErrNoDriver (or
// ErrNoDevice where a driver sees no GPU), never a panic.
func TestPublicAPIWithoutDriver(t *testing.T) {
	if Available() {
		t.Skip("a GPU is available; the GPU tests cover the API")
	}
	err := Init()
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNoDriver) || errors.Is(err, ErrNoDevice), "%v", err)
	assert.Equal(t, err, Init(), "Init reports the same result every time")
	_, err2 := DeviceCount()
	assert.Equal(t, err, err2)
	_, err2 = Device(0).Name()
	assert.Equal(t, err, err2)
	_, err2 = Device(0).PrimaryContext()
	assert.Equal(t, err, err2)
	_, err2 = DriverVersion()
	assert.Equal(t, err, err2)
	_, err2 = DriverPath()
	assert.Equal(t, err, err2)
	_, _, err2 = Device(0).ComputeCapability()
	assert.Equal(t, err, err2)
	_, err2 = Device(0).Properties()
	assert.Equal(t, err, err2)
	t.Logf("Init: %v", err)
}

// cuInit's CUDA_ERROR_UNKNOWN and CUDA_ERROR_OPERATING_SYSTEM, what a
// container without a usable GPU gets, mean no usable driver: they wrap
// ErrNoDriver, so that ParseDevice("auto") falls back as it does without
// libcuda, and keep the code. The same codes from a later call do not.
func TestInitFailureWithoutUsableGPUIsNoDriver(t *testing.T) {
	d := &driver{path: "fake"} // no cuGetErrorName: the table's names
	for code, name := range map[uint32]string{999: "CUDA_ERROR_UNKNOWN (999)", 304: "CUDA_ERROR_OPERATING_SYSTEM (304)"} {
		err := d.initError(code, "/usr/lib/libcuda.so.1")
		require.ErrorIs(t, err, ErrNoDriver, "code %d", code)
		assert.NotErrorIs(t, err, ErrNoDevice)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, int(code), e.Code)
		assert.Contains(t, err.Error(), "cuda: cuInit (/usr/lib/libcuda.so.1): "+name)
		assert.NotErrorIs(t, &Error{Call: "cuLaunchKernel", Code: int(code)}, ErrNoDriver)
	}
	require.ErrorIs(t, d.initError(cudaErrorStubLibrary, "libcuda.so"), ErrNoDriver)
	err := d.initError(cudaErrorNoDevice, "libcuda.so.1")
	require.ErrorIs(t, err, ErrNoDevice)
	assert.NotErrorIs(t, err, ErrNoDriver)
}
