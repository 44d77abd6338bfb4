package gorgonia

import (
	"fmt"
	"slices"
	"unsafe"

	_ "go4.org/unsafe/assume-no-moving-gc" // gorgonia.org/tensor panics at start on Go 1.26 with the copy it asks for
	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/tensor"
)

// dtypes pairs the element types both libraries have. gorgonia has no
// 16-bit floats; strata has no other integers, bools or complex numbers.
var dtypes = [...]struct {
	s tensor.DType
	g gt.Dtype
}{
	{tensor.Float32, gt.Float32},
	{tensor.Float64, gt.Float64},
	{tensor.Int32, gt.Int32},
}

func toGorgonia(dt tensor.DType) (gt.Dtype, bool) {
	for _, p := range dtypes {
		if p.s == dt {
			return p.g, true
		}
	}
	return gt.Dtype{}, false
}

func fromGorgonia(dt gt.Dtype) (tensor.DType, bool) {
	for _, p := range dtypes {
		if p.g == dt {
			return p.s, true
		}
	}
	return 0, false
}

// ToDense copies t, on any device, into a new gorgonia Dense in Go memory,
// row-major in t's logical order (views and transposes come out as the
// elements they show). A rank-0 tensor becomes a scalar Dense. Float32,
// float64 and int32 convert; float16 and bfloat16, which gorgonia lacks,
// are an error wrapping tensor.ErrDType (widen first: t.To(tensor.Float32)).
// A released tensor is an error wrapping tensor.ErrReleased, and one
// without elements one wrapping tensor.ErrShape (FromDense, the other
// way, turns a Dense of no elements into a tensor of its shape).
func ToDense(t *tensor.Tensor) (*gt.Dense, error) {
	if t == nil {
		return nil, fmt.Errorf("gorgonia: ToDense of a nil tensor: %w", tensor.ErrArgument)
	}
	g, ok := toGorgonia(t.DType())
	if !ok {
		return nil, fmt.Errorf("gorgonia: ToDense: gorgonia.org/tensor has no %v (convert with To(tensor.Float32) first): %w", t.DType(), tensor.ErrDType)
	}
	var raw []byte
	if err := tensor.Try(func() { raw = t.RawBytes() }); err != nil {
		return nil, err
	}
	shape := t.Shape()
	if len(raw) == 0 {
		return nil, fmt.Errorf("gorgonia: ToDense of a %v tensor: gorgonia.org/tensor cannot hold one without elements: %w", shape, tensor.ErrShape)
	}
	if len(shape) == 0 {
		switch g {
		case gt.Float32:
			return gt.New(gt.FromScalar(typed[float32](raw)[0])), nil
		case gt.Float64:
			return gt.New(gt.FromScalar(typed[float64](raw)[0])), nil
		default:
			return gt.New(gt.FromScalar(typed[int32](raw)[0])), nil
		}
	}
	var backing any
	switch g {
	case gt.Float32:
		backing = typed[float32](raw)
	case gt.Float64:
		backing = typed[float64](raw)
	default:
		backing = typed[int32](raw)
	}
	return gt.New(gt.WithShape(shape...), gt.WithBacking(backing)), nil
}

// FromDense is FromDenseCtx in tensor.Background().
func FromDense(dev tensor.Device, d *gt.Dense) (*tensor.Tensor, error) {
	return FromDenseCtx(tensor.Background(), dev, d)
}

// FromDenseCtx copies a gorgonia Dense into a new tensor on dev, made in c
// (owned by c's innermost scope, with c's memory role), in the Dense's
// logical order: transposed and sliced views and column-major data come
// out as the elements At reads, row-major like every strata tensor. A
// scalar Dense becomes a rank-0 tensor, a Dense of no elements a tensor of
// its shape. A nil c means tensor.Background(). Errors: a nil or
// zero-value Dense (&gt.Dense{}, which has no element type) wraps
// tensor.ErrArgument; element types other than float32, float64 and int32
// wrap tensor.ErrDType; a masked Dense with elements wraps
// tensor.ErrArgument (strata tensors have no masks); a Dense in memory the
// CPU cannot address (an Engine's device memory) wraps ErrInaccessible;
// failures to allocate on dev are the tensor package's errors.
func FromDenseCtx(c *tensor.Ctx, dev tensor.Device, d *gt.Dense) (*tensor.Tensor, error) {
	if d == nil {
		return nil, fmt.Errorf("gorgonia: FromDense of a nil Dense: %w", tensor.ErrArgument)
	}
	if c == nil {
		c = tensor.Background()
	}
	if d.Dtype().Type == nil {
		// A zero-value Dense: no element type, no shape (formatting
		// either panics inside gorgonia).
		return nil, fmt.Errorf("gorgonia: FromDense of an empty (zero-value) Dense: %w", tensor.ErrArgument)
	}
	dt, ok := fromGorgonia(d.Dtype())
	if !ok {
		return nil, fmt.Errorf("gorgonia: FromDense: element type %v (want float32, float64 or int32): %w", d.Dtype(), tensor.ErrDType)
	}
	if !d.IsNativelyAccessible() {
		return nil, fmt.Errorf("gorgonia: FromDense of a %v Dense the CPU cannot address (copy it to host memory first): %w", d.Shape(), ErrInaccessible)
	}
	// gorgonia's IsMasked is len(mask) == len(data): true for every Dense
	// of no elements, which has nothing to mask. Its DataSize is 0 for a
	// scalar, which has its one element and may have a mask for it: the
	// mask's own length tells.
	if d.IsMasked() && len(d.Mask()) > 0 {
		return nil, fmt.Errorf("gorgonia: FromDense of a masked %v Dense: strata tensors have no masks: %w", d.Shape(), tensor.ErrArgument)
	}
	raw, shape, err := logicalBytes(d, dt.Size())
	if err != nil {
		return nil, err
	}
	return c.FromBytes(dev, dt, raw, shape...)
}

// logicalBytes returns d's elements in row-major logical order and its
// shape (empty for a scalar), walking d's strides over its storage.
func logicalBytes(d *gt.Dense, es int) ([]byte, []int, error) {
	if d.IsScalar() {
		switch v := d.Data().(type) {
		case float32:
			return bytesOf(v), nil, nil
		case float64:
			return bytesOf(v), nil, nil
		case int32:
			return bytesOf(v), nil, nil
		}
		return nil, nil, fmt.Errorf("gorgonia: FromDense: scalar of type %T: %w", d.Data(), tensor.ErrDType)
	}
	shape := slices.Clone([]int(d.Shape()))
	n := 1
	for _, s := range shape {
		n *= s
	}
	out := make([]byte, n*es)
	if n == 0 {
		return out, shape, nil
	}
	data, ok := goBytes(d)
	if !ok {
		return nil, nil, fmt.Errorf("gorgonia: FromDense: the data of a %v Dense is a %T: %w", d.Dtype(), d.Data(), tensor.ErrDType)
	}
	strides := d.Strides()
	if len(strides) != len(shape) {
		return nil, nil, fmt.Errorf("gorgonia: FromDense: shape %v with strides %v: %w", shape, strides, tensor.ErrShape)
	}
	if isRowMajor(shape, strides) && len(data) >= len(out) {
		copy(out, data)
		return out, shape, nil
	}
	// An odometer over the logical index; off is the element offset the
	// strides give it.
	idx := make([]int, len(shape))
	off := 0
	for i := range n {
		if off < 0 || (off+1)*es > len(data) {
			return nil, nil, fmt.Errorf("gorgonia: FromDense: shape %v with strides %v reaches element %d of %d: %w",
				shape, strides, off, len(data)/es, tensor.ErrShape)
		}
		copy(out[i*es:(i+1)*es], data[off*es:])
		for ax := len(shape) - 1; ax >= 0; ax-- {
			idx[ax]++
			off += strides[ax]
			if idx[ax] < shape[ax] {
				break
			}
			off -= strides[ax] * shape[ax]
			idx[ax] = 0
		}
	}
	return out, shape, nil
}

// isRowMajor reports whether strides are the dense row-major strides of
// shape (axes of length 1 may have any stride).
func isRowMajor(shape, strides []int) bool {
	want := 1
	for ax := len(shape) - 1; ax >= 0; ax-- {
		if shape[ax] != 1 && strides[ax] != want {
			return false
		}
		want *= shape[ax]
	}
	return true
}

// typed copies little-endian element bytes into a new []T (a new slice,
// so that it is aligned for T).
func typed[T any](raw []byte) []T {
	var z T
	out := make([]T, len(raw)/int(unsafe.Sizeof(z)))
	if len(out) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(raw)), raw)
	}
	return out
}
