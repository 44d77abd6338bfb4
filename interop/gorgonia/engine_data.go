package gorgonia

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"unsafe"

	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/memory"
)

// Memset sets every element of mem to val, a number or a bool of mem's
// element type (checked when mem says its type, as a *gt.Dense does; a
// mismatch wraps memory.ErrInvalidArgument). Host-accessible memory that can set itself (a *gt.Dense,
// views included) does so, as gorgonia's standard engine has it; other
// memory is filled with val's bytes, which must divide its size. Device
// memory needs the engine's CUDA context, and a view of it (which would
// cover elements outside the view) is refused.
func (e *Engine) Memset(mem gt.Memory, val any) error {
	r, err := e.locate("Memset", mem)
	if err != nil {
		return err
	}
	pat, ok := valueBytes(val)
	if !ok {
		return fmt.Errorf("gorgonia: Engine.Memset with a %T: want a number or a bool: %w", val, memory.ErrInvalidArgument)
	}
	// A zero-value Dense says no type (and formatting its Dtype panics
	// inside gorgonia); it has no elements either, as Memclr finds.
	if d, ok := mem.(interface{ Dtype() gt.Dtype }); ok && d.Dtype().Type != nil && d.Dtype().Type != reflect.TypeOf(val) {
		return fmt.Errorf("gorgonia: Engine.Memset of %v elements with a %T: %w", d.Dtype(), val, memory.ErrInvalidArgument)
	}
	if r.size == 0 {
		return nil // no elements (locate gives neither host nor device bytes)
	}
	if ms, ok := mem.(gt.MemSetter); ok && r.host != nil {
		return ms.Memset(val)
	}
	if r.size%int64(len(pat)) != 0 {
		return fmt.Errorf("gorgonia: Engine.Memset: %d bytes are not a whole number of %d-byte %T values: %w",
			r.size, len(pat), val, memory.ErrInvalidArgument)
	}
	if r.host != nil {
		fill(r.host, pat)
		return nil
	}
	if err := e.deviceWrite("Memset", mem); err != nil {
		return err
	}
	switch len(pat) {
	case 1:
		err = e.ctx.MemsetD8(r.dev, pat[0], int(r.size))
	case 4:
		err = e.ctx.MemsetD32(r.dev, binary.NativeEndian.Uint32(pat), int(r.size/4))
	default:
		buf := make([]byte, r.size)
		fill(buf, pat)
		err = e.ctx.MemcpyHtoD(r.dev, buf)
	}
	if err != nil {
		return fmt.Errorf("gorgonia: Engine.Memset: %w", err)
	}
	return nil
}

// Memclr sets mem's bytes to zero (a *gt.Dense in host memory zeroes its
// own elements, views included, and no others). The interface gives it no error to
// return, so it panics where Memset would fail: memory it cannot locate,
// device memory without a CUDA context or a view of it, a failed driver
// call.
func (e *Engine) Memclr(mem gt.Memory) {
	r, err := e.locate("Memclr", mem)
	if err != nil {
		panic(err)
	}
	if d, ok := mem.(*gt.Dense); ok && r.host != nil && d.IsMaterializable() {
		// gorgonia's Zero of a view that skips elements (a column) clears
		// them too: after the view's own elements it clears the whole
		// stretch of storage the view spans. Memset walks the view's only.
		if err := d.Memset(reflect.Zero(d.Dtype().Type).Interface()); err != nil {
			panic(fmt.Errorf("gorgonia: Engine.Memclr: %w", err))
		}
		if d.IsMasked() {
			d.ResetMask()
		}
		return
	}
	if z, ok := mem.(gt.Zeroer); ok && r.host != nil {
		z.Zero()
		return
	}
	if r.host != nil {
		clear(r.host)
		return
	}
	if r.size == 0 {
		return
	}
	if err := e.deviceWrite("Memclr", mem); err != nil {
		panic(err)
	}
	if err := e.ctx.MemsetD8(r.dev, 0, int(r.size)); err != nil {
		panic(fmt.Errorf("gorgonia: Engine.Memclr: %w", err))
	}
}

// Memcpy copies src's MemSize bytes to the start of dst, as gorgonia's
// standard engine copies arrays: bytes in storage order, whatever the
// shapes and strides. Either side may be memory of this engine in any
// tier or a gorgonia tensor's Go memory; copies that touch device memory
// go through the engine's CUDA context (host to device, device to host,
// device to device). dst smaller than src is an error.
func (e *Engine) Memcpy(dst, src gt.Memory) error {
	d, err := e.locate("Memcpy", dst)
	if err != nil {
		return err
	}
	s, err := e.locate("Memcpy", src)
	if err != nil {
		return err
	}
	if d.size < s.size {
		return fmt.Errorf("gorgonia: Engine.Memcpy of %d bytes into %d: %w", s.size, d.size, memory.ErrInvalidArgument)
	}
	n := int(s.size)
	if n == 0 {
		return nil
	}
	if d.host != nil && s.host != nil {
		copy(d.host, s.host)
		return nil
	}
	if e.ctx == nil {
		return fmt.Errorf("gorgonia: Engine.Memcpy of %d bytes to or from device memory: the engine has no CUDA context: %w", n, ErrInaccessible)
	}
	switch {
	case d.host != nil:
		err = e.ctx.MemcpyDtoH(d.host[:n], s.dev)
	case s.host != nil:
		err = e.ctx.MemcpyHtoD(d.dev, s.host)
	default:
		err = e.ctx.MemcpyDtoD(d.dev, s.dev, n)
	}
	if err != nil {
		return fmt.Errorf("gorgonia: Engine.Memcpy: %w", err)
	}
	return nil
}

// deviceWrite checks that device memory mem can be filled whole.
func (e *Engine) deviceWrite(op string, mem gt.Memory) error {
	if e.ctx == nil {
		return fmt.Errorf("gorgonia: Engine.%s of device memory: the engine has no CUDA context: %w", op, ErrInaccessible)
	}
	if v, ok := mem.(interface{ IsView() bool }); ok && v.IsView() {
		return fmt.Errorf("gorgonia: Engine.%s of a view of device memory: its bytes include elements outside the view: %w", op, memory.ErrInvalidArgument)
	}
	return nil
}

// fill repeats pat over b (len(b) a multiple of len(pat)).
func fill(b, pat []byte) {
	if len(b) == 0 {
		return
	}
	n := copy(b, pat)
	for n < len(b) {
		n += copy(b[n:], b[:n])
	}
}

// valueBytes returns the in-memory bytes of one number or bool.
func valueBytes(v any) ([]byte, bool) {
	switch x := v.(type) {
	case bool:
		return bytesOf(x), true
	case int:
		return bytesOf(x), true
	case int8:
		return bytesOf(x), true
	case int16:
		return bytesOf(x), true
	case int32:
		return bytesOf(x), true
	case int64:
		return bytesOf(x), true
	case uint:
		return bytesOf(x), true
	case uint8:
		return bytesOf(x), true
	case uint16:
		return bytesOf(x), true
	case uint32:
		return bytesOf(x), true
	case uint64:
		return bytesOf(x), true
	case uintptr:
		return bytesOf(x), true
	case float32:
		return bytesOf(x), true
	case float64:
		return bytesOf(x), true
	case complex64:
		return bytesOf(x), true
	case complex128:
		return bytesOf(x), true
	}
	return nil, false
}

func bytesOf[T any](v T) []byte {
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v))...)
}

// goBytes returns the bytes behind a gorgonia tensor or array in Go
// memory: what its Data method returns, when that is a slice of numbers or
// bools (never of pointers, which must not be copied as bytes).
func goBytes(mem gt.Memory) ([]byte, bool) {
	if d, ok := mem.(*gt.Dense); ok && d.IsScalar() && d.Dtype().Type != nil {
		// A scalar Dense's Data is its one number, not a slice: its bytes
		// are its array's, as for any other Dense.
		if !plainKind(d.Dtype().Kind()) {
			return nil, false
		}
		return d.Raw, true
	}
	d, ok := mem.(interface{ Data() any })
	if !ok {
		return nil, false
	}
	v := reflect.ValueOf(d.Data())
	if v.Kind() != reflect.Slice || !plainKind(v.Type().Elem().Kind()) {
		return nil, false
	}
	n := v.Len() * int(v.Type().Elem().Size())
	if n == 0 {
		return []byte{}, true
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), n), true
}

// plainKind reports whether values of kind k hold no pointers.
func plainKind(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return true
	}
	return false
}
