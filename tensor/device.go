package tensor

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strata-ml/strata/memory"
)

// DeviceKind tells CPU from CUDA devices.
type DeviceKind uint8

const (
	KindCPU DeviceKind = iota
	KindCUDA
)

// Device is where a tensor's storage lives and where its ops run. Each
// device owns a memory.Manager from which all its tensors' storage comes.
// The set of devices is closed: the op surface a device must provide is the
// unexported backend interface.
type Device interface {
	String() string
	Kind() DeviceKind
	// Memory is the device's memory manager (per-tier pools, statistics).
	Memory() *memory.Manager
	// Synchronize waits for all queued work on the device.
	Synchronize() error
	backend() backend
}

var (
	cpuOnce sync.Once
	cpuDev  *cpuDevice
)

// CPU returns the CPU device. Its memory manager puts every tier in host
// memory, so the placement policy and per-tier accounting stay real, and
// charges all of it to one memory.HostBudget (memory.DefaultHostBudget: a
// share of the memory this process may use, or $STRATA_HOST_MEMORY), so
// that a job too large for the machine fails with an out-of-memory error
// instead of being killed by the kernel.
func CPU() Device {
	cpuOnce.Do(func() {
		b, err := memory.DefaultHostBudget()
		if err != nil {
			fmt.Fprintln(os.Stderr, "strata:", err)
		}
		cpuDev = &cpuDevice{mem: memory.NewBudgetHostManager(memory.Config{}, b), name: "cpu"}
	})
	return cpuDev
}

// NewCPUDevice returns a CPU device whose tensors come from m instead of
// CPU()'s manager: a manager of one's own, with other limits, or with
// fault-injecting backends in tests. Tensors of two CPU devices do not mix
// in one op (copy with ToDevice); the devices are named apart in messages:
// CPU() is "cpu", the devices NewCPUDevice returns "cpu#2", "cpu#3", and so
// on. A nil m panics with an *OpError wrapping ErrArgument (CPU() is the
// device of the default manager).
func NewCPUDevice(m *memory.Manager) Device {
	if m == nil {
		fail("NewCPUDevice", ErrArgument, "nil memory manager (tensor.CPU() is the CPU device of the default one)")
	}
	return &cpuDevice{mem: m, name: fmt.Sprintf("cpu#%d", cpuDevices.Add(1)+1)}
}

// cpuDevices counts the devices NewCPUDevice made.
var cpuDevices atomic.Int64

// cudaOpener opens a CUDA device; cuda_device.go's init sets it in every
// build. cudaAbsent, set beside it, reports whether an error of it means
// no driver or no GPU at all (ParseDevice's "auto" then picks the CPU
// silently).
var (
	cudaOpener func(ordinal int) (Device, error)
	cudaAbsent func(error) bool
)

// autoNote prints ParseDevice's fallback note once, to autoNoteTo.
var (
	autoNote   sync.Once
	autoNoteTo io.Writer = os.Stderr
)

// CUDA returns CUDA device number ordinal, or an error wrapping ErrDevice
// when no usable driver or device is present.
func CUDA(ordinal int) (Device, error) {
	if cudaOpener == nil {
		return nil, fmt.Errorf("tensor: cuda:%d: this build has no CUDA support: %w", ordinal, ErrDevice)
	}
	return cudaOpener(ordinal)
}

// ParseDevice returns the device named s: "cpu", "cuda", "cuda:N", or
// "auto" (the first CUDA device when one works, else the CPU). The empty
// string means the STRATA_DEVICE environment variable, or "auto". When
// "auto" falls back to the CPU for another reason than an absent driver
// or GPU (a driver that fails to initialise, a device busy or out of
// memory, kernels the driver cannot load), it says so once on standard
// error, with the cause: a broken GPU setup is not mistaken for a machine
// without one.
func ParseDevice(s string) (Device, error) {
	kind, n, err := deviceName(s)
	switch {
	case err != nil:
		return nil, err
	case kind == "auto":
		d, err := CUDA(0)
		if err == nil {
			return d, nil
		}
		if cudaAbsent == nil || !cudaAbsent(err) {
			autoNote.Do(func() {
				fmt.Fprintf(autoNoteTo, "strata: device auto: the CPU, since CUDA device 0 is not usable: %v\n", err)
			})
		}
		return CPU(), nil
	case kind == "cpu":
		return CPU(), nil
	}
	return CUDA(n)
}

// CheckDeviceName reports whether s names a device as ParseDevice reads
// it (the empty string is $STRATA_DEVICE), without opening the device:
// for checking a flag before any work.
func CheckDeviceName(s string) error {
	_, _, err := deviceName(s)
	return err
}

// deviceName parses a device name for ParseDevice: kind is auto, cpu or
// cuda, with the CUDA ordinal.
func deviceName(s string) (kind string, ordinal int, err error) {
	if s == "" {
		s = os.Getenv("STRATA_DEVICE")
	}
	switch s = strings.ToLower(strings.TrimSpace(s)); {
	case s == "" || s == "auto":
		return "auto", 0, nil
	case s == "cpu":
		return "cpu", 0, nil
	case s == "cuda" || s == "gpu":
		return "cuda", 0, nil
	case strings.HasPrefix(s, "cuda:"):
		n, err := strconv.Atoi(s[5:])
		if err != nil || n < 0 {
			return "", 0, fmt.Errorf("tensor: bad device %q: want cuda:N with N >= 0: %w", s, ErrDevice)
		}
		return "cuda", n, nil
	}
	return "", 0, fmt.Errorf("tensor: unknown device %q (want cpu, cuda, cuda:N or auto): %w", s, ErrDevice)
}

// DeviceModel is the hardware's name: the GPU's marketing name for a CUDA
// device ("NVIDIA H200"), "cpu" for the CPU.
func DeviceModel(dev Device) string {
	if d, ok := dev.(*cudaDevice); ok {
		return d.props.Name
	}
	return "cpu"
}
