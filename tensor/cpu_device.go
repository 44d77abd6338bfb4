package tensor

import (
	"fmt"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor/internal/blas"
)

// cpuDevice runs ops with the Go kernels of internal/cpukern and the BLAS
// of internal/blas on host memory.
type cpuDevice struct {
	mem  *memory.Manager
	name string // "cpu" for CPU(), "cpu#2", "cpu#3", ... for NewCPUDevice's
}

func (d *cpuDevice) String() string          { return d.name }
func (d *cpuDevice) Kind() DeviceKind        { return KindCPU }
func (d *cpuDevice) Memory() *memory.Manager { return d.mem }
func (d *cpuDevice) Synchronize() error      { return nil }
func (d *cpuDevice) backend() backend        { return cpuBackend{} }

// cpuBackend implements backend on the host.
type cpuBackend struct{}

// hostAll is t's whole storage as a slice of T (for strided access).
func hostAll[T any](t *Tensor) []T { return castSlice[T](t.ref.st.host()) }

// hostData is the elements of contiguous t as a slice of T.
func hostData[T any](t *Tensor) []T {
	return hostAll[T](t)[t.offset : t.offset+t.Numel()]
}

func f32(t *Tensor) []float32 { return hostData[float32](t) }
func f64(t *Tensor) []float64 { return hostData[float64](t) }
func i32(t *Tensor) []int32   { return hostData[int32](t) }

// f32or64 returns nil for a nil tensor (optional operands).
func opt32(t *Tensor) []float32 {
	if t == nil {
		return nil
	}
	return f32(t)
}

func opt64(t *Tensor) []float64 {
	if t == nil {
		return nil
	}
	return f64(t)
}

// onFloat runs the float32 or float64 version of a kernel.
func onFloat(op string, dt DType, k32, k64 func()) {
	switch dt {
	case Float32:
		k32()
	case Float64:
		k64()
	default:
		fail(op, ErrDType, "%v is not supported by this op on the cpu (cast to float32 first)", dt)
	}
}

// workspace32 returns float32 scratch for a CPU kernel of op on dev, one
// slice of each length in ns, and what gives it back. The bytes come from
// dev's memory manager (memory.RoleWorkspace, one allocation cut into
// 64-byte aligned pieces), as tensor storage does: a host budget counts
// them, and a lack of memory is the op's *OpError wrapping the manager's
// out-of-memory error, which the op's own defers clean up after, where a
// make of the same size was outside the budget and, when huge, a fatal
// error of the Go runtime. The caller defers free, so the scratch goes
// back when the kernel panics too. The slices are not zeroed.
func workspace32(op string, dev Device, ns ...int) (bufs [][]float32, free func()) {
	const align = 16 // float32s: 64 bytes
	var total int64
	for _, n := range ns {
		total += (int64(n) + align - 1) / align * align
		if total > (1<<62)/4 {
			fail(op, memory.ErrOutOfMemory, "a float32 workspace of more than %d elements on %v is more bytes than memory can address", total, dev)
		}
	}
	bufs = make([][]float32, len(ns))
	if total == 0 {
		return bufs, func() {}
	}
	a, err := dev.Memory().AllocOp(4*total, memory.RoleWorkspace, 0, op)
	if err != nil {
		panic(&OpError{Op: op, Msg: fmt.Sprintf("allocating a float32 workspace of %s on %v", memory.FormatBytes(4*total), dev), Err: err})
	}
	all := castSlice[float32](a.Host())
	off := 0
	for i, n := range ns {
		bufs[i] = all[off : off+n : off+n]
		off += (n + align - 1) / align * align
	}
	return bufs, func() {
		if err := a.Free(); err != nil {
			panic(fmt.Sprintf("tensor: freeing a workspace of %s: %v", op, err)) // a bug: freed exactly once
		}
	}
}

// CPUBackendInfo describes the CPU matrix-product backend (the BLAS
// library in use, or the pure-Go fallback).
func CPUBackendInfo() string { return blas.Backend() }
