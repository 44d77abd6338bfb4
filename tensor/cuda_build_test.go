package tensor

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// These tests need no GPU: they guard the build of the CUDA backend.

// TestKernelSourcesMatchFatbin fails when kernels/*.cu or *.cuh changed
// after tensor/kernels.fatbin was built: the embedded kernels would not be
// the ones in the tree.
func TestKernelSourcesMatchFatbin(t *testing.T) {
	dir := filepath.Join("..", "kernels")
	var files []string
	for _, pat := range []string{"*.cu", "*.cuh"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		require.NoError(t, err)
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Skipf("no kernel sources in %s (the test binary runs outside the repository)", dir)
	}
	sort.Slice(files, func(i, j int) bool { return filepath.Base(files[i]) < filepath.Base(files[j]) })
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		h.Write(b)
	}
	want, err := os.ReadFile("kernels.sha256")
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(want)), hex.EncodeToString(h.Sum(nil)),
		"kernels/*.cu changed: run make kernels on a machine with nvcc and commit tensor/kernels.fatbin (and tensor/kernels.sha256)")
}

func TestEmbeddedFatbinIsAFatbin(t *testing.T) {
	require.GreaterOrEqual(t, len(kernelsFatbin), 4, "tensor/kernels.fatbin is empty: run make kernels")
	require.Equal(t, uint32(fatbinMagic), binary.LittleEndian.Uint32(kernelsFatbin), "tensor/kernels.fatbin is not an nvcc fatbin")
	t.Setenv(EnvKernels, "")
	img, from, err := kernelImage()
	require.NoError(t, err)
	require.Equal(t, len(kernelsFatbin), len(img))
	require.Contains(t, from, "embedded")
}

func TestKernelOverrideVariable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k.fatbin")
	require.NoError(t, os.WriteFile(p, []byte("not a fatbin"), 0o600))
	t.Setenv(EnvKernels, p)
	img, from, err := kernelImage()
	require.NoError(t, err)
	require.Equal(t, "not a fatbin", string(img))
	require.Equal(t, p, from)
	t.Setenv(EnvKernels, p+".missing")
	_, _, err = kernelImage()
	require.ErrorContains(t, err, EnvKernels)
}

// TestKernelBindingsAreComplete checks the kernel table: every slot is
// bound to exactly one name (the GPU tests then resolve every name).
func TestKernelBindingsAreComplete(t *testing.T) {
	var k cudaKernels
	b := k.bindings()
	slots := map[uintptr]string{}
	for name, slot := range b {
		p := uintptr(unsafe.Pointer(slot))
		require.NotContains(t, slots, p, "%s and %s share a slot", name, slots[p])
		slots[p] = name
	}
	// Every field of cudaKernels is made of *cuda.Function slots: count
	// them by size. Only the cast table's diagonal (same dtype: a copy)
	// stays empty.
	slotCount := int(unsafe.Sizeof(k)) / int(unsafe.Sizeof(uintptr(0)))
	require.Equal(t, slotCount-int(numDTypes), len(b), "a kernel slot has no name")
}

// TestLayoutCoalesce checks dim merging and the byte layout of the
// structs passed by value (kernels/common.cuh Layout1, Layout2).
func TestLayoutCoalesce(t *testing.T) {
	l := coalesce([]int{2, 3, 4}, []int{12, 4, 1})
	require.True(t, l.ok)
	require.Equal(t, 1, l.ndim)
	require.Equal(t, 24, l.shape[0])

	// A bias add: a (rows, cols) contiguous, b broadcast along rows.
	l = coalesce([]int{5, 7}, []int{7, 1}, []int{0, 1})
	require.Equal(t, 2, l.ndim)
	require.Equal(t, [2]int{5, 7}, [2]int{l.shape[0], l.shape[1]})
	require.Equal(t, [2]int{0, 1}, [2]int{l.str[1][0], l.str[1][1]})

	// A transpose of (4, 6): stays two dims with strides (1, 4).
	l = coalesce([]int{6, 4}, []int{1, 6})
	require.Equal(t, 2, l.ndim)
	require.Equal(t, 1, l.str[0][0])

	// Unit dims drop out; all-unit shapes become 0-d.
	l = coalesce([]int{1, 1}, []int{5, 9})
	require.True(t, l.ok)
	require.Equal(t, 0, l.ndim)

	// Nine dims that cannot merge are refused.
	shape, str := make([]int, 9), make([]int, 9)
	for i := range shape {
		shape[i], str[i] = 2, 1<<(2*(8-i)) // every stride leaves a gap
	}
	require.False(t, coalesce(shape, str).ok)

	var b1 [8 + 16*8]byte
	var b2 [8 + 24*8]byte
	l = coalesce([]int{3, 5}, []int{1, 3}, []int{0, 1})
	require.Len(t, l.bytes1(&b1), 136) // sizeof(Layout1)
	require.Len(t, l.bytes2(&b2), 200) // sizeof(Layout2)
	require.Equal(t, uint32(2), binary.LittleEndian.Uint32(b2[0:]))
	require.Equal(t, uint64(5), binary.LittleEndian.Uint64(b2[8+8:]))
	require.Equal(t, uint64(1), binary.LittleEndian.Uint64(b2[8+64:]))
	require.Equal(t, uint64(3), binary.LittleEndian.Uint64(b2[8+64+8:]))
	require.Equal(t, uint64(1), binary.LittleEndian.Uint64(b2[8+128+8:]))
}

func TestChunking(t *testing.T) {
	for _, c := range []struct{ mid, blocks, minLen int }{
		{0, 1, 4096}, {1, 1, 4096}, {100, 1, 4096}, {1 << 20, 1, 4096}, {8192, 24, 64}, {3, 5000, 64}, {1<<20 + 17, 3, 4096},
	} {
		chunks, n := chunking(c.mid, c.blocks, c.minLen)
		require.GreaterOrEqual(t, chunks, 1)
		require.LessOrEqual(t, chunks, reduceMaxChunks)
		require.GreaterOrEqual(t, chunks*n, c.mid, "%+v", c)
		require.Less(t, (chunks-1)*n, max(c.mid, 1), "%+v: the last chunk is empty", c)
	}
}
