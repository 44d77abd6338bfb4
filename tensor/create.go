package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor/internal/cpukern"
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
// converting them as To converts float64 (to nearest, through float32
// for the halves; int32 truncated and saturated).
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
	// A shape whose element count overflows is reported as such (by
	// elements, then newTensor), not as a wrapped-around byte count.
	if n, problem := elements(shape, dt); problem == "" && dt < numDTypes && n*dt.Size() != len(data) {
		return nil, &OpError{Op: "FromBytes", Msg: fmt.Sprintf("%d bytes for %v %v, want %d", len(data), dt, shape, n*dt.Size()), Err: ErrShape}
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
	n, problem := elements(shape, dt)
	if problem != "" {
		fail(op, ErrShape, "%s", problem)
	}
	if n != len(data) {
		fail(op, ErrShape, "%d values for shape %v (%d elements)", len(data), shape, n)
	}
	t := mustNew(op, c, dev, dt, shape)
	if len(data) > 0 {
		filled(t, func() { uploadSlice(t, data) })
	}
	return t
}

// uploadSlice copies data, t's elements in its dtype, into contiguous t.
func uploadSlice[T any](t *Tensor, data []T) {
	if len(data) == 0 {
		return
	}
	var z T
	b := unsafe.Slice((*byte)(unsafe.Pointer(&data[0])), len(data)*int(unsafe.Sizeof(z)))
	t.dev.backend().upload(t, b)
}

// generated returns a tensor of dtype dt and the given shape ([1] when
// empty, as FromFloats makes it) holding the float64 values that gen
// writes, converted as FromFloats converts them. The memory manager is
// asked for the tensor, and for dtypes other than float64 a float64
// staging tensor, before the host buffer of the values is made: a shape
// too large fails with the manager's error (an *OpError wrapping
// memory.ErrOutOfMemory, or ErrShape), where a host buffer made first
// could end the process in Go's fatal out-of-memory. On the CPU gen writes
// into the staging tensor itself (memory the manager counts); other
// devices get the values through a host buffer.
func (c *Ctx) generated(op string, dev Device, dt DType, shape []int, gen func(v []float64)) *Tensor {
	if len(shape) == 0 {
		shape = []int{1}
	}
	out := mustNew(op, c, dev, dt, shape)
	return filled(out, func() {
		f := out
		if dt != Float64 {
			f = mustNew(op, c, dev, Float64, shape)
			defer f.Release()
		}
		if _, onCPU := dev.backend().(cpuBackend); onCPU {
			gen(f64(f)) // straight into the staging tensor: no Go buffer outside the budget
		} else {
			v := make([]float64, f.Numel())
			gen(v)
			uploadSlice(f, v)
		}
		if f != out {
			dev.backend().cast(out, f) // as To converts
		}
	})
}

// RandN returns normal(0, std) samples drawn from rng (deterministic for a
// seeded rng, the same on every device: they are drawn on the host), of
// a float dtype (Int32 is an *OpError wrapping ErrDType).
func (c *Ctx) RandN(dev Device, dt DType, rng *rand.Rand, std float64, shape ...int) *Tensor {
	randCheck("RandN", dt, rng, shape)
	return c.generated("RandN", dev, dt, shape, func(v []float64) {
		for i := range v {
			v[i] = rng.NormFloat64() * std
		}
	})
}

// RandUniform returns uniform [lo, hi) samples drawn from rng, of a
// float dtype as RandN's.
func (c *Ctx) RandUniform(dev Device, dt DType, rng *rand.Rand, lo, hi float64, shape ...int) *Tensor {
	randCheck("RandUniform", dt, rng, shape)
	return c.generated("RandUniform", dev, dt, shape, func(v []float64) {
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float64()
		}
	})
}

// randCheck checks the arguments of RandN and RandUniform (the tensor's
// allocation checks the element count): a float dtype (samples truncated
// to int32 are no such samples: PyTorch refuses them too), a random
// source, no negative dimension.
func randCheck(op string, dt DType, rng *rand.Rand, shape []int) {
	if dt < numDTypes && !dt.IsFloat() {
		fail(op, ErrDType, "%v samples: want a float dtype", dt)
	}
	if rng == nil {
		fail(op, ErrArgument, "nil random source")
	}
	if slices.ContainsFunc(shape, func(d int) bool { return d < 0 }) {
		fail(op, ErrShape, "negative dimension in shape %v", shape)
	}
}

// Arange returns the int32 or float values start, start+1, ..., start+n-1.
// They must lie in int's range, and for int32 in its own (ErrArgument
// otherwise). The tensor is allocated before the host buffer of its
// values, and on the CPU the values are written straight into it (see
// generated).
func (c *Ctx) Arange(dev Device, dt DType, start, n int) *Tensor {
	if n < 0 {
		fail("Arange", ErrShape, "negative length %d", n)
	}
	if n > 0 && start > math.MaxInt-(n-1) { // start+i would wrap around
		fail("Arange", ErrArgument, "%d values from %d overflow int", n, start)
	}
	if dt == Int32 {
		if n > 0 && (start < math.MinInt32 || start > math.MaxInt32-(n-1)) {
			fail("Arange", ErrArgument, "%d values from %d do not fit in int32", n, start)
		}
		t := mustNew("Arange", c, dev, Int32, []int{n})
		return filled(t, func() {
			if _, onCPU := dev.backend().(cpuBackend); onCPU {
				cpukern.Arange(i32(t), int32(start), 1) // straight into the tensor: no Go buffer outside the budget
				return
			}
			ids := make([]int32, n)
			cpukern.Arange(ids, int32(start), 1)
			uploadSlice(t, ids)
		})
	}
	return c.generated("Arange", dev, dt, []int{n}, func(v []float64) {
		for i := range v {
			v[i] = float64(start + i)
		}
	})
}

// ZerosLike returns zeros of t's shape, dtype and device, in t's context.
func ZerosLike(t *Tensor) *Tensor {
	t.live("ZerosLike")
	return full("ZerosLike", ctxOf("ZerosLike", t), t.dev, t.dtype, 0, t.shape...)
}
