package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

// Args is a reusable kernel argument list for LaunchKernelArgs. Build it
// with chained calls, one per kernel parameter, in order:
//
//	a.Reset().Ptr(x).Ptr(y).Int32(n)
//
// The values are written straight into a block of C memory (see arena.go)
// laid out as cuLaunchKernel wants it, so building and launching allocate
// nothing. A mistake (too many arguments, an unsupported type in Add, use
// after Free) is remembered and returned by the launch, like bufio.Writer
// errors. An Args is not safe for concurrent use; give each launching
// goroutine its own. Free returns the block at once; an Args dropped
// without Free returns it when the garbage collector finds it.
type Args struct {
	block   unsafe.Pointer // [MaxKernelArgs]uintptr pointers, then the values
	n       int            // arguments so far
	off     int            // value bytes used
	sizes   [MaxKernelArgs]uint16
	err     error
	cleanup runtime.Cleanup
}

// NewArgs returns an empty argument list. It fails only if the process
// cannot map 256 KiB more memory.
func NewArgs() (*Args, error) {
	b, err := allocArgBlock()
	if err != nil {
		return nil, err
	}
	a := &Args{block: b}
	a.cleanup = runtime.AddCleanup(a, freeArgBlock, b)
	return a, nil
}

// Free returns the argument block; a must not be used afterwards.
func (a *Args) Free() {
	if a.block == nil {
		return
	}
	a.cleanup.Stop()
	freeArgBlock(a.block)
	a.block = nil
}

// Reset empties the list (and clears a remembered error) for reuse.
func (a *Args) Reset() *Args {
	a.n, a.off, a.err = 0, 0, nil
	return a
}

// Len returns the number of arguments.
func (a *Args) Len() int { return a.n }

// Err returns the first mistake made while building, if any.
func (a *Args) Err() error { return a.err }

func (a *Args) fail(format string, args ...any) {
	if a.err == nil {
		a.err = invalidArg("kernel arguments", format, args...)
	}
}

// ptrs is the kernelParams array.
func (a *Args) ptrs() *[MaxKernelArgs]uintptr { return (*[MaxKernelArgs]uintptr)(a.block) }

// slot reserves size bytes aligned to align for the next argument and
// points the next kernelParams entry at them; nil after a mistake.
func (a *Args) slot(size, align int) unsafe.Pointer {
	switch {
	case a.err != nil:
		return nil
	case a.block == nil:
		a.fail("argument list used after Free")
		return nil
	case a.n == MaxKernelArgs:
		a.fail("argument %d: more than %d arguments", a.n+1, MaxKernelArgs)
		return nil
	}
	off := (a.off + align - 1) &^ (align - 1)
	if off+size > MaxKernelArgBytes {
		a.fail("argument %d (%d bytes): the arguments exceed %d bytes", a.n+1, size, MaxKernelArgBytes)
		return nil
	}
	p := unsafe.Add(a.block, argPtrBytes+off)
	a.ptrs()[a.n] = uintptr(p)
	a.sizes[a.n] = uint16(size)
	a.n++
	a.off = off + size
	return p
}

// Ptr appends a device pointer (a T* parameter).
func (a *Args) Ptr(p DevicePtr) *Args { return a.Uint64(uint64(p)) }

// HostPtr appends a host address, e.g. page-locked memory mapped with
// HostAllocDeviceMap on a device with unified addressing.
func (a *Args) HostPtr(p unsafe.Pointer) *Args { return a.Uint64(uint64(uintptr(p))) }

// Uint8 appends an unsigned char (or bool) parameter.
func (a *Args) Uint8(v uint8) *Args {
	if p := a.slot(1, 1); p != nil {
		*(*uint8)(p) = v
	}
	return a
}

// Int8 appends a signed char parameter.
func (a *Args) Int8(v int8) *Args { return a.Uint8(uint8(v)) }

// Bool appends a bool parameter (one byte).
func (a *Args) Bool(v bool) *Args {
	var b uint8
	if v {
		b = 1
	}
	return a.Uint8(b)
}

// Uint16 appends an unsigned short parameter (or a half, as its bits).
func (a *Args) Uint16(v uint16) *Args {
	if p := a.slot(2, 2); p != nil {
		*(*uint16)(p) = v
	}
	return a
}

// Int16 appends a short parameter.
func (a *Args) Int16(v int16) *Args { return a.Uint16(uint16(v)) }

// Uint32 appends an unsigned int parameter.
func (a *Args) Uint32(v uint32) *Args {
	if p := a.slot(4, 4); p != nil {
		*(*uint32)(p) = v
	}
	return a
}

// Int32 appends an int parameter.
func (a *Args) Int32(v int32) *Args { return a.Uint32(uint32(v)) }

// Float32 appends a float parameter.
func (a *Args) Float32(v float32) *Args { return a.Uint32(math.Float32bits(v)) }

// Uint64 appends an unsigned long long (or size_t, or pointer) parameter.
func (a *Args) Uint64(v uint64) *Args {
	if p := a.slot(8, 8); p != nil {
		*(*uint64)(p) = v
	}
	return a
}

// Int64 appends a long long parameter.
func (a *Args) Int64(v int64) *Args { return a.Uint64(uint64(v)) }

// Float64 appends a double parameter.
func (a *Args) Float64(v float64) *Args { return a.Uint64(math.Float64bits(v)) }

// Bytes appends a parameter passed by value whose bytes are b, e.g. a
// small struct laid out as the kernel declares it; align is its C
// alignment (a power of two up to 16).
func (a *Args) Bytes(b []byte, align int) *Args {
	if align < 1 || align > 16 || align&(align-1) != 0 {
		a.fail("argument %d: alignment %d is not a power of two up to 16", a.n+1, align)
		return a
	}
	if len(b) == 0 {
		a.fail("argument %d: empty by-value argument", a.n+1)
		return a
	}
	if p := a.slot(len(b), align); p != nil {
		copy(unsafe.Slice((*byte)(p), len(b)), b)
	}
	return a
}

// Add appends v by its Go type: DevicePtr, uintptr and unsafe.Pointer as
// 8-byte pointers; int8 to int64, uint8 to uint64, float32, float64 and
// bool as the C types of the same size. Go's int and uint are refused:
// their size does not say whether the kernel takes an int or a long long.
func (a *Args) Add(v any) *Args {
	switch v := v.(type) {
	case DevicePtr:
		return a.Ptr(v)
	case uintptr:
		return a.Uint64(uint64(v))
	case unsafe.Pointer:
		return a.HostPtr(v)
	case int8:
		return a.Int8(v)
	case uint8:
		return a.Uint8(v)
	case bool:
		return a.Bool(v)
	case int16:
		return a.Int16(v)
	case uint16:
		return a.Uint16(v)
	case int32:
		return a.Int32(v)
	case uint32:
		return a.Uint32(v)
	case float32:
		return a.Float32(v)
	case int64:
		return a.Int64(v)
	case uint64:
		return a.Uint64(v)
	case float64:
		return a.Float64(v)
	case int, uint:
		a.fail("argument %d is a Go %T (%v), whose size does not match a C type: pass int32 for int, int64 for long long", a.n+1, v, v)
	default:
		a.fail("argument %d has unsupported type %T: use Args.Bytes for structs passed by value", a.n+1, v)
	}
	return a
}

// checkParams compares the arguments with the kernel's parameter sizes
// (when the driver could report them).
func (a *Args) checkParams(fn *Function) error {
	if fn.params == nil {
		return nil
	}
	if a.n != len(fn.params) {
		return invalidArg("LaunchKernel", "kernel %s takes %d parameters, got %d arguments", fn.name, len(fn.params), a.n)
	}
	for i, want := range fn.params {
		if got := int(a.sizes[i]); got != want {
			return invalidArg("LaunchKernel", "kernel %s parameter %d is %d bytes, argument %d is %d bytes", fn.name, i, want, i+1, got)
		}
	}
	return nil
}

func (a *Args) String() string {
	return fmt.Sprintf("%d kernel arguments, %d bytes", a.n, a.off)
}
