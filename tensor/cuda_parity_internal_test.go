package tensor

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// CPU/CUDA parity of the Go launchers, checked on the fake device of
// cuda_abi_test.go (address ranges with nothing behind them, a queue that
// records launches): what the CUDA path launches or refuses for inputs
// the CPU takes.

// launchesOf returns the recorded launches of the kernel named name.
func launchesOf(q *recordingQueue, names map[string]bool, fnName func(l launchRecord) string) []launchRecord {
	var out []launchRecord
	for _, l := range q.launches {
		if names[fnName(l)] {
			out = append(out, l)
		}
	}
	return out
}

// A float64 product taller than gemm_f64's grid (65535 tiles of 16 rows,
// blockIdx.y not striding) runs in bands of rows; it was refused with
// ErrShape on CUDA only, for example when MatMul folded a batch of 600,000
// rows twice into one product.
func TestCUDAMatMulFloat64TallRunsInBands(t *testing.T) {
	d, q, names := fakeCUDADevice(t)
	name := func(l launchRecord) string { return names[l.fn] }
	gemm := map[string]bool{"gemm_f64": true}
	before := d.mem.InUse()
	const band = maxGridYZ * 16
	WithScope(func() {
		for _, c := range []struct {
			a, b  []int
			trans bool
		}{
			{[]int{2, 600000, 3}, []int{3, 4}, false}, // a batch folded into the rows
			{[]int{band + 17, 3}, []int{3, 4}, false},
			{[]int{3, band + 17}, []int{3, 4}, true}, // a transposed view: column bands of the stored A
		} {
			q.launches = nil
			a := mustNew("t", nil, d, Float64, c.a)
			if c.trans {
				a = a.T()
			}
			out := MatMul(a, mustNew("t", nil, d, Float64, c.b))
			m := out.Numel() / 4
			ls := launchesOf(q, gemm, name)
			require.Len(t, ls, ceilDiv(m, band), "%v", c.a)
			rows := 0
			for _, l := range ls {
				require.LessOrEqual(t, l.grid[1], uint32(maxGridYZ), "%v", c.a)
				rows += int(l.grid[1]) * 16
			}
			require.GreaterOrEqual(t, rows, m)
		}
	})
	require.Equal(t, before, d.mem.InUse())
}

// MatMul folds a batch into the rows of one product only while the rows
// fit a GEMM's 32-bit m (cuBLAS refuses more): (3, 2^30, 1) @ (1, 1) runs
// as a batch of 3.
func TestMatMulFoldKeeps32BitRows(t *testing.T) {
	d, q, names := fakeCUDADevice(t)
	WithScope(func() {
		a := mustNew("t", nil, d, Float64, []int{3, 1 << 30, 1})
		_ = MatMul(a, mustNew("t", nil, d, Float64, []int{1, 1}))
		ls := launchesOf(q, map[string]bool{"gemm_f64": true}, func(l launchRecord) string { return names[l.fn] })
		require.NotEmpty(t, ls)
		for _, l := range ls {
			require.Equal(t, uint32(3), l.grid[2], "the batch is not folded into 3 * 2^30 rows")
		}
	})
}

// Rows of zero elements still have their ids and targets checked on
// CUDA, as the CPU checks them (an error there; on CUDA the kernels report
// at the next synchronization): the launchers skipped the kernels, so a
// bad id or target into a (V, 0) table or (N, 0) logits passed silently.
func TestCUDAZeroWidthRowsStillCheckIndices(t *testing.T) {
	WithScope(func() { // the CPU refuses each
		for _, fn := range []func(){
			func() { Embedding(Zeros(CPU(), Float32, 4, 0), FromInt32s(CPU(), []int32{7}, 1)) },
			func() { EmbeddingBackward(FromInt32s(CPU(), []int32{7}, 1), Zeros(CPU(), Float32, 1, 0), 4) },
			func() {
				CrossEntropyBackward(Zeros(CPU(), Float32, 2, 0), FromInt32s(CPU(), []int32{1, -100}, 2), Ones(CPU(), Float32, 2), -100)
			},
		} {
			require.ErrorIs(t, Try(fn), ErrArgument)
		}
	})
	d, q, names := fakeCUDADevice(t)
	launched := func() []string {
		var ns []string
		for _, l := range q.launches {
			ns = append(ns, names[l.fn])
		}
		q.launches = nil
		return ns
	}
	before := d.mem.InUse()
	WithScope(func() {
		ids := mustNew("t", nil, d, Int32, []int{1})
		_ = Embedding(mustNew("t", nil, d, Float32, []int{4, 0}), ids)
		require.Contains(t, launched(), "gather_b4")

		_ = EmbeddingBackward(ids, mustNew("t", nil, d, Float32, []int{1, 0}), 4)
		ns := launched()
		require.Contains(t, ns, "scatter_keys")
		require.False(t, slices.Contains(ns, "scatter_runs_f32"), "nothing to add: %v", ns)

		_ = CrossEntropyBackward(mustNew("t", nil, d, Float32, []int{2, 0}), mustNew("t", nil, d, Int32, []int{2}), mustNew("t", nil, d, Float32, []int{2}), -100)
		require.Contains(t, launched(), "cross_entropy_backward_warp_f32")
	})
	require.Equal(t, before, d.mem.InUse())
}

// A view whose layout keeps more than 8 dims after merging is refused by
// the CUDA copy and binary kernels (ErrShape; the CPU takes up to 16):
// Clone and the binary ops released their output before, and leaked it.
func TestCUDARefusedLayoutReleasesOutput(t *testing.T) {
	shape := []int{2, 2, 2, 2, 2, 2, 2, 2, 2}
	perm := []int{8, 7, 6, 5, 4, 3, 2, 1, 0} // reversed strides: no two dims merge
	WithScope(func() {
		x := Zeros(CPU(), Float32, shape...).Permute(perm...)
		require.NoError(t, Try(func() { x.Clone() }))
		require.NoError(t, Try(func() { Add(x, x) }))
	})
	d, _, _ := fakeCUDADevice(t)
	before := d.mem.InUse()
	WithScope(func() {
		x := mustNew("t", nil, d, Float32, shape).Permute(perm...)
		inUse := d.mem.InUse()
		require.ErrorIs(t, Try(func() { x.Clone() }), ErrShape)
		require.ErrorIs(t, Try(func() { Add(x, x) }), ErrShape)
		require.Equal(t, inUse, d.mem.InUse(), "the refused ops' outputs are released")
	})
	require.Equal(t, before, d.mem.InUse())
}
