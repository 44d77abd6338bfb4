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
	// Every field of cudaKernels is made of *cuda.Function slots but the
	// attention kernels' launch bounds (a map, one word): count them by
	// size. Only the cast table's diagonal (same dtype: a copy) stays
	// empty.
	slotCount := int(unsafe.Sizeof(k))/int(unsafe.Sizeof(uintptr(0))) - 1
	require.Equal(t, unsafe.Sizeof(k.attention.warps), unsafe.Sizeof(uintptr(0)))
	require.Equal(t, slotCount-int(numDTypes), len(b), "a kernel slot has no name")
}

// TestLayoutBytes checks the byte layout of the structs passed by value
// (kernels/common.cuh Layout1, Layout2) and the CUDA backend's limit of
// cudaMaxDims merged dims (layout.Merge itself is tested in its package).
func TestLayoutBytes(t *testing.T) {
	var b1 [8 + 16*8]byte
	var b2 [8 + 24*8]byte
	l := mergeDims("t", []int{3, 5}, []int{1, 3}, []int{0, 1})
	require.True(t, cudaLayoutFits(&l))
	require.Len(t, layoutBytes1(&l, &b1), 136) // sizeof(Layout1)
	require.Len(t, layoutBytes2(&l, &b2), 200) // sizeof(Layout2)
	require.Equal(t, uint32(2), binary.LittleEndian.Uint32(b2[0:]))
	require.Equal(t, uint64(5), binary.LittleEndian.Uint64(b2[8+8:]))
	require.Equal(t, uint64(1), binary.LittleEndian.Uint64(b2[8+64:]))
	require.Equal(t, uint64(3), binary.LittleEndian.Uint64(b2[8+64+8:]))
	require.Equal(t, uint64(1), binary.LittleEndian.Uint64(b2[8+128+8:]))
	require.Equal(t, b1[:], b2[:136], "Layout2 starts as Layout1")

	// Nine dims that cannot merge: a layout for the CPU, too many for CUDA.
	shape, str := make([]int, 9), make([]int, 9)
	for i := range shape {
		shape[i], str[i] = 2, 1<<(2*(8-i)) // every stride leaves a gap
	}
	l = mergeDims("t", shape, str)
	require.Equal(t, 9, l.NDim)
	require.False(t, cudaLayoutFits(&l))
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
