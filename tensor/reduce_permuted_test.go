package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestReduceOverPermutedViews: Sum and Max over a permuted view (a
// transposed matrix, a permuted 3-D or 4-D tensor, with size-1 dims and
// an offset) equal the same reduction of its contiguous copy, for every
// set of axes, with and without keepDim (reduce reads such a view in its
// storage's order instead of copying it first).
func TestReduceOverPermutedViews(t *testing.T) {
	cpu := tensor.CPU()
	rng := rand.New(rand.NewPCG(5, 6))
	tensor.WithScope(func() {
		cases := []struct {
			shape []int
			perm  []int
		}{
			{[]int{5, 7}, []int{1, 0}},
			{[]int{3, 4, 5}, []int{2, 0, 1}},
			{[]int{3, 4, 5}, []int{1, 2, 0}},
			{[]int{2, 1, 3, 4}, []int{3, 1, 0, 2}},
			{[]int{2, 3, 1, 4}, []int{0, 2, 3, 1}},
		}
		for _, c := range cases {
			base := tensor.RandN(cpu, tensor.Float64, rng, 1, append([]int{3}, c.shape...)...)
			x := base.Narrow(0, 1, 1).Reshape(c.shape...) // an offset into the storage
			p := x.Permute(c.perm...)
			ref := p.Contiguous()
			n := p.Rank()
			for mask := 1; mask < 1<<n; mask++ {
				var axes []int
				for a := range n {
					if mask&(1<<a) != 0 {
						axes = append(axes, a)
					}
				}
				for _, keep := range []bool{false, true} {
					for name, f := range map[string]func(*tensor.Tensor, bool, ...int) *tensor.Tensor{"Sum": tensor.Sum, "Max": tensor.Max} {
						got, want := f(p, keep, axes...), f(ref, keep, axes...)
						require.Equal(t, want.Shape(), got.Shape(), "%s %v perm %v axes %v keep %v", name, c.shape, c.perm, axes, keep)
						gv, wv := got.Float64s(), want.Float64s()
						for i := range wv {
							require.InDelta(t, wv[i], gv[i], 1e-12, "%s %v perm %v axes %v keep %v [%d]", name, c.shape, c.perm, axes, keep, i)
						}
					}
				}
			}
		}
	})
}
