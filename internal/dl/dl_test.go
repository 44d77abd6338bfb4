package dl

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCString(t *testing.T) {
	assert.Equal(t, "", CString(0))
	b := []byte("strata\x00rest")
	assert.Equal(t, "strata", CString(uintptr(unsafe.Pointer(&b[0]))))
	runtime.KeepAlive(b)
}

func TestArch(t *testing.T) {
	assert.Contains(t, []string{"x86_64-linux-gnu", "aarch64-linux-gnu"}, ArchTriplet())
	assert.Contains(t, []string{"x86_64-linux", "sbsa-linux"}, ArchTarget())
}

// TestOpenLibc loads the C library and calls strlen through it.
func TestOpenLibc(t *testing.T) {
	if !Supported {
		_, err := Open("libc.so.6")
		require.Error(t, err)
		return
	}
	h, err := Open("libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6 here: %v", err)
	}
	fn, err := Sym(h, "strlen")
	require.NoError(t, err)
	s := []byte("hello\x00")
	assert.Equal(t, uintptr(5), Call(fn, uintptr(unsafe.Pointer(&s[0]))))
	_, err = Sym(h, "no_such_function_in_libc")
	require.Error(t, err)
	_, err = Open("/nonexistent/libnothing.so")
	require.Error(t, err)
}

// ToolkitDirs lists the versioned toolkits newest first by version
// number, as its doc says: cuda-9.2 came before cuda-12.4 (and 12.10
// after 12.9), the names' byte order, so an old toolkit's libcublas.so
// was found before the new one's.
func TestToolkitDirsNewestFirst(t *testing.T) {
	old := glob
	t.Cleanup(func() { glob = old })
	glob = func(string) ([]string, error) {
		return []string{"/usr/local/cuda-9.2/lib64", "/usr/local/cuda-12.10/lib64", "/usr/local/cuda-11.8/lib64",
			"/usr/local/cuda-12/lib64", "/usr/local/cuda-12.9/lib64", "/usr/local/cuda-10.1/lib64"}, nil
	}
	dirs := ToolkitDirs()
	require.Equal(t, []string{"/usr/local/cuda-12.10/lib64", "/usr/local/cuda-12.9/lib64", "/usr/local/cuda-12/lib64",
		"/usr/local/cuda-11.8/lib64", "/usr/local/cuda-10.1/lib64", "/usr/local/cuda-9.2/lib64"}, dirs[len(dirs)-6:])
}
