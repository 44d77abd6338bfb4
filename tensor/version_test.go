package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// TestVersionCountsInPlaceWrites: every function that writes into a
// tensor it did not make counts one write on the tensor's storage, seen
// by every view of it; ops that make a new tensor leave their operands'
// counts alone.
func TestVersionCountsInPlaceWrites(t *testing.T) {
	cpu := tensor.CPU()
	tensor.WithScope(func() {
		vec := func() *tensor.Tensor { return tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 4) }
		mat := func() *tensor.Tensor { return tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4}, 2, 2) }
		args, err := tensor.NewAdamWArgs(cpu)
		require.NoError(t, err)
		require.NoError(t, args.Set(1e-3, 0.9, 0.999, 1e-8, 1))
		cases := []struct {
			name  string
			write func(x *tensor.Tensor)
			make  func() *tensor.Tensor
		}{
			{"Fill", func(x *tensor.Tensor) { x.Fill(0) }, vec},
			{"AddInPlace", func(x *tensor.Tensor) { x.AddInPlace(vec()) }, vec},
			{"ScaleInPlace", func(x *tensor.Tensor) { x.ScaleInPlace(2) }, vec},
			{"CausalMaskInPlace", func(x *tensor.Tensor) { x.CausalMaskInPlace(0) }, mat},
			{"CopyFrom", func(x *tensor.Tensor) { x.CopyFrom(vec()) }, vec},
			{"WriteNarrow", func(x *tensor.Tensor) {
				x.WriteNarrow(0, 1, tensor.FromFloat32s(cpu, []float32{9}, 1))
			}, vec},
			{"MatMulInto", func(x *tensor.Tensor) { tensor.MatMulInto(x, mat(), mat(), 0, tensor.MatMulMode{}) }, mat},
			{"EmbeddingBackwardInto", func(x *tensor.Tensor) {
				tensor.EmbeddingBackwardInto(x, tensor.FromInt32s(cpu, []int32{1}, 1), tensor.FromFloat32s(cpu, []float32{1, 1}, 1, 2))
			}, mat},
			{"AdamWStep", func(x *tensor.Tensor) {
				tensor.AdamWStep(x, vec(), tensor.ZerosLike(x), tensor.ZerosLike(x), 1e-3, 0.9, 0.999, 1e-8, 0, 1)
			}, vec},
			{"AdamWSteps", func(x *tensor.Tensor) {
				tensor.AdamWSteps([]*tensor.Tensor{x}, []*tensor.Tensor{vec()}, []*tensor.Tensor{tensor.ZerosLike(x)},
					[]*tensor.Tensor{tensor.ZerosLike(x)}, []float64{0}, 1e-3, 0.9, 0.999, 1e-8, 1)
			}, vec},
			{"AdamWStepsPipelined", func(x *tensor.Tensor) {
				tensor.AdamWStepsPipelined([]*tensor.Tensor{x}, []*tensor.Tensor{vec()}, []*tensor.Tensor{tensor.ZerosLike(x)},
					[]*tensor.Tensor{tensor.ZerosLike(x)}, []float64{0}, 1e-3, 0.9, 0.999, 1e-8, 1, []int{1}, 1, nil)
			}, vec},
			{"AdamWStepsGuarded", func(x *tensor.Tensor) {
				tensor.AdamWStepsGuarded([]*tensor.Tensor{x}, []*tensor.Tensor{vec()}, []*tensor.Tensor{tensor.ZerosLike(x)},
					[]*tensor.Tensor{tensor.ZerosLike(x)}, []float64{0}, args, nil)
			}, vec},
			{"SGDStep", func(x *tensor.Tensor) { tensor.SGDStep(x, vec(), nil, 0.1, 0, 0, false) }, vec},
			{"ScaleAll", func(x *tensor.Tensor) { tensor.ScaleAll([]*tensor.Tensor{x, nil}, 2) }, vec},
			{"UnscaleGrads", func(x *tensor.Tensor) { tensor.UnscaleGrads([]*tensor.Tensor{x}, 0.5) }, vec},
			{"MarkModified", func(x *tensor.Tensor) { x.MarkModified() }, vec},
		}
		for _, c := range cases {
			x := c.make()
			view := x.Reshape(x.Numel())
			require.Zero(t, x.Version(), c.name)
			c.write(x)
			require.EqualValues(t, 1, x.Version(), c.name)
			require.EqualValues(t, 1, view.Version(), "%s: a view shares its storage's count", c.name)
			c.write(view.Reshape(x.Shape()...))
			require.EqualValues(t, 2, x.Version(), "%s through a view", c.name)
		}

		x := vec()
		for _, f := range []func(){
			func() { tensor.Add(x, x) },
			func() { x.Clone() },
			func() { x.Contiguous() },
			func() { x.To(tensor.Float64) },
			func() { tensor.Sum(x, false) },
			func() { vec().CopyFrom(x) },
			func() { x.CopyFrom(x) }, // a copy onto itself writes nothing
		} {
			f()
		}
		require.Zero(t, x.Version(), "reads and copies onto itself do not count")

		// A write refused before it happened is not counted.
		require.Error(t, tensor.Try(func() { x.AddInPlace(mat()) }))
		require.Zero(t, x.Version())

		x.Release()
		require.Zero(t, x.Version(), "readable after Release")
		require.ErrorIs(t, tensor.Try(x.MarkModified), tensor.ErrReleased)
	})
}
