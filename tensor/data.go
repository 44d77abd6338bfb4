package tensor

// hostCopy returns t's elements, converted to dtype dt, in a new Go slice
// of bytes (synchronizing the device first).
func hostCopy(op string, t *Tensor, dt DType) []byte {
	t.live(op)
	c := t.To(dt)
	defer c.Release()
	if err := t.dev.Synchronize(); err != nil {
		fail(op, err, "synchronizing %v", t.dev)
	}
	buf := make([]byte, c.Bytes())
	t.dev.backend().download(buf, c)
	return buf
}

func bytesAs[T any](b []byte) []T {
	if s := castSlice[T](b); s != nil {
		return s
	}
	return []T{}
}

// Float32s copies the elements to a new slice, converted to float32.
func (t *Tensor) Float32s() []float32 { return bytesAs[float32](hostCopy("Float32s", t, Float32)) }

// Float64s copies the elements to a new slice, converted to float64.
func (t *Tensor) Float64s() []float64 { return bytesAs[float64](hostCopy("Float64s", t, Float64)) }

// Int32s copies the elements to a new slice, converted to int32.
func (t *Tensor) Int32s() []int32 { return bytesAs[int32](hostCopy("Int32s", t, Int32)) }

// RawBytes copies the elements in their own dtype, little-endian.
func (t *Tensor) RawBytes() []byte { return hostCopy("RawBytes", t, t.dtype) }

// Item returns the value of a one-element tensor. Panics with ErrShape
// otherwise.
func (t *Tensor) Item() float64 {
	t.live("Item")
	if t.Numel() != 1 {
		fail("Item", ErrShape, "tensor of shape %v has %d elements, want 1", t.shape, t.Numel())
	}
	return t.Float64s()[0]
}
