package cpukern

import (
	"fmt"
	"unsafe"
)

// Float is the element constraint of the arithmetic kernels: float32 for
// training, float64 for gradient checks and references.
type Float interface{ ~float32 | ~float64 }

// Number adds int32 (token ids, indices) to Float, for Convert and Arange.
type Number interface{ ~float32 | ~float64 | ~int32 }

// isF32 reports whether T is a 4-byte float. It is a compile-time constant
// in each instantiation, so branches on it cost nothing.
func isF32[T Float]() bool {
	var z T
	return unsafe.Sizeof(z) == 4
}

// isInt reports whether the Number type T is an integer type.
func isInt[T Number]() bool {
	one, two := T(1), T(2)
	return one/two == 0
}

// f32 reinterprets a slice of a float32-shaped T as []float32. Only valid
// when isF32[T]() holds; it lets the generic entry points hand float32 data
// to hand-tuned loops without copying.
func f32[T Float](s []T) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// f64 is f32's counterpart for float64-shaped T.
func f64[T Float](s []T) []float64 {
	return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// mustEq panics with a message naming the kernel and the argument when a
// slice's length is not the one the kernel needs. The tensor package
// validates shapes before it calls in, so this guards against its bugs,
// not users'.
func mustEq(kernel, arg string, got, want int) {
	if got != want {
		panicLen(kernel, arg, got, want)
	}
}

//go:noinline
func panicLen(kernel, arg string, got, want int) {
	panic(fmt.Sprintf("cpukern.%s: %s has %d elements, want %d", kernel, arg, got, want))
}
