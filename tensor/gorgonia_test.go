package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/tensor"
)

// FromDense keeps a Dense's logical order: a transposed or sliced view, or
// column-major data, comes out as the elements At reads, row-major.
func TestFromDenseLogicalOrder(t *testing.T) {
	transposed := gt.New(gt.WithShape(2, 3), gt.WithBacking([]float64{1, 2, 3, 4, 5, 6}))
	require.NoError(t, transposed.T())
	base := gt.New(gt.WithShape(3, 4), gt.WithBacking(gt.Range(gt.Float64, 0, 12)))
	sliced, err := base.Slice(gt.S(1, 3), gt.S(0, 2))
	require.NoError(t, err)
	colMajor := gt.New(gt.WithShape(2, 3, 2), gt.WithBacking(gt.Range(gt.Float64, 0, 12)), gt.AsFortran(nil))
	for name, d := range map[string]*gt.Dense{
		"transposed": transposed, "sliced": sliced.(*gt.Dense), "column-major": colMajor,
	} {
		got, err := tensor.FromDense(cpu, d)
		require.NoError(t, err, name)
		require.Equal(t, []int(d.Shape()), got.Shape(), name)
		var want []float64
		it := make([]int, d.Dims())
		for {
			v, err := d.At(it...)
			require.NoError(t, err)
			want = append(want, v.(float64))
			k := len(it) - 1
			for ; k >= 0; k-- {
				if it[k]++; it[k] < d.Shape()[k] {
					break
				}
				it[k] = 0
			}
			if k < 0 {
				break
			}
		}
		require.Equal(t, want, got.Float64s(), name)
	}
}
