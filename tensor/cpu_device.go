package tensor

import (
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

// CPUBackendInfo describes the CPU matrix-product backend (the BLAS
// library in use, or the pure-Go fallback).
func CPUBackendInfo() string { return blas.Backend() }
