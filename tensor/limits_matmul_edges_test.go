package tensor_test

import (
	"errors"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestNewAtByteLimitWrapsSentinel: a tensor of exactly 2^62 bytes, which
// passed tensor's own size check and was refused by the memory pool with
// memory.ErrInvalidArgument, fails with ErrShape as New's doc promises.
func TestNewAtByteLimitWrapsSentinel(t *testing.T) {
	cpu := tensor.CPU()
	for _, c := range []struct {
		dt tensor.DType
		n  int
	}{{tensor.Float32, 1 << 60}, {tensor.Float64, 1 << 59}, {tensor.Float16, 1 << 61}} {
		_, err := tensor.NewCtx().New(cpu, c.dt, memory.RoleActivation, c.n)
		if err == nil {
			t.Fatalf("%v [%d]: no error", c.dt, c.n)
		}
		if !errors.Is(err, tensor.ErrShape) && !errors.Is(err, memory.ErrOutOfMemory) {
			t.Errorf("%v [%d]: %v wraps neither ErrShape nor memory.ErrOutOfMemory", c.dt, c.n, err)
		}
	}
	// The ops report it the same way (Concat of two 2^61-byte views).
	err := tensor.Try(func() {
		tensor.WithScope(func() {
			v := tensor.Zeros(cpu, tensor.Float32, 1).Expand(1 << 59)
			tensor.Concat(0, v, v)
		})
	})
	if !errors.Is(err, tensor.ErrShape) && !errors.Is(err, memory.ErrOutOfMemory) {
		t.Errorf("Concat: %v wraps neither ErrShape nor memory.ErrOutOfMemory", err)
	}
}

// TestMatMulIntoHalfEmptyInnerScalesC: MatMulInto of half operands with
// k == 0 and beta not 0 or 1 writes beta*c, as the k > 0 path and
// PyTorch's addmm do (it panicked with ErrDType: ScaleInPlace refuses half
// tensors).
func TestMatMulIntoHalfEmptyInnerScalesC(t *testing.T) {
	cpu := tensor.CPU()
	for _, dt := range []tensor.DType{tensor.Float16, tensor.BFloat16} {
		tensor.WithScope(func() {
			c := tensor.Full(cpu, dt, 2, 2, 2)
			a, b := tensor.Zeros(cpu, dt, 2, 0), tensor.Zeros(cpu, dt, 0, 2)
			if err := tensor.Try(func() { tensor.MatMulInto(c, a, b, 0.5, tensor.MatMulMode{}) }); err != nil {
				t.Fatalf("%v: %v", dt, err)
			}
			for i, v := range c.Float32s() {
				if v != 1 { // torch.addmm(c, a, b, beta=0.5) == 1
					t.Errorf("%v: c[%d] = %v, want 1", dt, i, v)
				}
			}
		})
	}
}

// TestReduceScalarAxis: a scalar's reductions take axis 0 or -1 (and
// keepDim) as PyTorch's torch.tensor(3.).sum(0) does, giving the scalar;
// another axis, or one twice, is ErrShape.
func TestReduceScalarAxis(t *testing.T) {
	cpu := tensor.CPU()
	tensor.WithScope(func() {
		x := tensor.FromFloat32s(cpu, []float32{3}).Reshape()
		for _, axis := range []int{0, -1} {
			for _, keep := range []bool{false, true} {
				for name, r := range map[string]*tensor.Tensor{
					"Sum": tensor.Sum(x, keep, axis), "Max": tensor.Max(x, keep, axis), "Mean": tensor.Mean(x, keep, axis),
				} {
					if r.Rank() != 0 || r.Float32s()[0] != 3 {
						t.Errorf("%s(scalar, %v, %d) = %v %v, want the scalar 3", name, keep, axis, r.Shape(), r.Float32s())
					}
				}
			}
		}
		for _, axes := range [][]int{{1}, {-2}, {0, 0}} {
			if err := tensor.Try(func() { tensor.Sum(x, false, axes...) }); !errors.Is(err, tensor.ErrShape) {
				t.Errorf("Sum(scalar, axes %v): %v, want ErrShape", axes, err)
			}
		}
	})
}
