package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/strata-ml/strata/memory"
)

// The creation functions are methods of Ctx: the new tensor belongs to c
// and is owned by c's innermost scope, if any. The package-level
// functions of the same names (create_background.go) create in
// Background.

// New allocates an uninitialised contiguous tensor for the given memory
// role. It returns an error (wrapping memory.ErrOutOfMemory, ErrShape,
// ErrDType or ErrDevice) instead of panicking.
func (c *Ctx) New(dev Device, dt DType, role memory.Role, shape ...int) (*Tensor, error) {
	return newTensor("New", c, dev, dt, role, shape)
}

// Empty allocates an uninitialised tensor with c's role. It panics with
// an *OpError on a bad shape or when memory runs out.
func (c *Ctx) Empty(dev Device, dt DType, shape ...int) *Tensor {
	return mustNew("Empty", c, dev, dt, shape)
}

// Full returns a tensor filled with v. Panics like Empty.
func (c *Ctx) Full(dev Device, dt DType, v float64, shape ...int) *Tensor {
	return full("Full", c, dev, dt, v, shape...)
}

// full is Full for ops: c may be nil (see place).
func full(op string, c *Ctx, dev Device, dt DType, v float64, shape ...int) *Tensor {
	t := mustNew(op, c, dev, dt, shape)
	return filled(t, func() { dev.backend().fill(t, v) })
}

// filled runs fill on t, a tensor just made, and returns t; when fill
// panics (a failed launch or copy), t is released before the panic goes
// on up, since no caller holds it yet (a tensor made outside any scope,
// as ops make their constants, would otherwise stay allocated).
func filled(t *Tensor, fill func()) *Tensor {
	ok := false
	defer func() {
		if !ok {
			t.Release()
		}
	}()
	fill()
	ok = true
	return t
}

// Zeros returns a tensor of zeros. Panics like Empty.
func (c *Ctx) Zeros(dev Device, dt DType, shape ...int) *Tensor { return c.Full(dev, dt, 0, shape...) }

// Ones returns a tensor of ones. Panics like Empty.
func (c *Ctx) Ones(dev Device, dt DType, shape ...int) *Tensor { return c.Full(dev, dt, 1, shape...) }

// Scalar returns a 0-dimensional tensor holding v.
func (c *Ctx) Scalar(dev Device, dt DType, v float64) *Tensor { return c.Full(dev, dt, v) }

// FromFloat32s copies data into a new float32 tensor of the given shape
// (a 1-D tensor when shape is empty). Panics with ErrShape when the sizes
// disagree.
func (c *Ctx) FromFloat32s(dev Device, data []float32, shape ...int) *Tensor {
	return fromSlice("FromFloat32s", c, dev, Float32, data, shape)
}

// FromFloat64s copies data into a new float64 tensor (see FromFloat32s).
func (c *Ctx) FromFloat64s(dev Device, data []float64, shape ...int) *Tensor {
	return fromSlice("FromFloat64s", c, dev, Float64, data, shape)
}

// FromInt32s copies data into a new int32 tensor (see FromFloat32s).
func (c *Ctx) FromInt32s(dev Device, data []int32, shape ...int) *Tensor {
	return fromSlice("FromInt32s", c, dev, Int32, data, shape)
}

// FromFloats copies float64 values into a new tensor of any dtype,
// converting them (rounding to nearest for halves).
func (c *Ctx) FromFloats(dev Device, dt DType, data []float64, shape ...int) *Tensor {
	t := c.FromFloat64s(dev, data, shape...)
	if dt == Float64 {
		return t
	}
	defer t.Release()
	return t.To(dt)
}

// FromBytes makes a tensor from raw little-endian element bytes. A failed
// upload (a driver error, or an upload refused while the device captures
// a CUDA graph) is returned as its error, the tensor released.
func (c *Ctx) FromBytes(dev Device, dt DType, data []byte, shape ...int) (*Tensor, error) {
	if n := numel(shape) * dt.Size(); n != len(data) {
		return nil, &OpError{Op: "FromBytes", Msg: fmt.Sprintf("%d bytes for %v %v, want %d", len(data), dt, shape, n), Err: ErrShape}
	}
	t, err := newTensor("FromBytes", c, dev, dt, c.Role(), shape)
	if err != nil {
		return nil, err
	}
	if err := Try(func() { filled(t, func() { dev.backend().upload(t, data) }) }); err != nil {
		return nil, err
	}
	return t, nil
}

func fromSlice[T any](op string, c *Ctx, dev Device, dt DType, data []T, shape []int) *Tensor {
	if len(shape) == 0 {
		shape = []int{len(data)}
	}
	if numel(shape) != len(data) {
		fail(op, ErrShape, "%d values for shape %v (%d elements)", len(data), shape, numel(shape))
	}
	t := mustNew(op, c, dev, dt, shape)
	if len(data) > 0 {
		var z T
		b := unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*int(unsafe.Sizeof(z)))
		filled(t, func() { dev.backend().upload(t, b) })
	}
	return t
}

// RandN returns normal(0, std) samples drawn from rng (deterministic for a
// seeded rng, the same on every device: they are drawn on the host).
func (c *Ctx) RandN(dev Device, dt DType, rng *rand.Rand, std float64, shape ...int) *Tensor {
	v := make([]float64, randCount("RandN", rng, shape))
	for i := range v {
		v[i] = rng.NormFloat64() * std
	}
	return c.FromFloats(dev, dt, v, shape...)
}

// RandUniform returns uniform [lo, hi) samples drawn from rng.
func (c *Ctx) RandUniform(dev Device, dt DType, rng *rand.Rand, lo, hi float64, shape ...int) *Tensor {
	v := make([]float64, randCount("RandUniform", rng, shape))
	for i := range v {
		v[i] = lo + (hi-lo)*rng.Float64()
	}
	return c.FromFloats(dev, dt, v, shape...)
}

// randCount checks the arguments of RandN and RandUniform and returns the
// number of samples to draw (on the host, before the tensor exists).
func randCount(op string, rng *rand.Rand, shape []int) int {
	if rng == nil {
		fail(op, ErrArgument, "nil random source")
	}
	if slices.ContainsFunc(shape, func(d int) bool { return d < 0 }) {
		fail(op, ErrShape, "negative dimension in shape %v", shape)
	}
	return numel(shape)
}

// Arange returns the int32 or float values start, start+1, ..., start+n-1.
// For int32 they must lie in its range (ErrArgument otherwise).
func (c *Ctx) Arange(dev Device, dt DType, start, n int) *Tensor {
	if n < 0 {
		fail("Arange", ErrShape, "negative length %d", n)
	}
	if dt == Int32 {
		if n > 0 && (start < math.MinInt32 || start > math.MaxInt32-(n-1)) {
			fail("Arange", ErrArgument, "%d values from %d do not fit in int32", n, start)
		}
		ids := make([]int32, n)
		for i := range ids {
			ids[i] = int32(start + i)
		}
		return c.FromInt32s(dev, ids, n)
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(start + i)
	}
	return c.FromFloats(dev, dt, v, n)
}

// ZerosLike returns zeros of t's shape, dtype and device, in t's context.
func ZerosLike(t *Tensor) *Tensor {
	t.live("ZerosLike")
	return full("ZerosLike", ctxOf("ZerosLike", t), t.dev, t.dtype, 0, t.shape...)
}
