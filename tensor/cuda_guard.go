package tensor

import (
	"fmt"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
)

// The guarded step's blocks (guard.go) in mapped pinned host memory, and
// its kernels (kernels/guard.cuh, adamw_multi_guarded in optim.cuh).

const (
	stepGuardBytes = 128
	adamwArgsBytes = 128
)

// The mirrors must fit their blocks (a negative array length does not
// compile).
var (
	_ [stepGuardBytes - unsafe.Sizeof(stepGuardWords{})]byte
	_ [adamwArgsBytes - unsafe.Sizeof(adamwArgsWords{})]byte
)

// cudaMapped is a block of page-locked host memory mapped into the
// device's address space: the host reads and writes it through host, the
// kernels through dev.
type cudaMapped struct {
	d    *cudaDevice
	what string // its owner, for errors
	host unsafe.Pointer
	dev  cuda.DevicePtr
	// freed is set by free: host and dev then address memory given back,
	// where a host access crashes the process and a kernel's faults the
	// device's context for good (live refuses them).
	freed bool
}

// newMapped allocates n zeroed bytes of mapped pinned host memory.
func (d *cudaDevice) newMapped(what string, n int) (*cudaMapped, error) {
	host, b, err := d.ctx.MemHostAlloc(n, cuda.HostAllocDeviceMap)
	if err != nil {
		return nil, &OpError{Op: what, Msg: fmt.Sprintf("allocating %d bytes of mapped host memory for %v", n, d), Err: err}
	}
	clear(b)
	dev, err := d.ctx.MemHostGetDevicePointer(host)
	if err != nil {
		_ = d.ctx.MemFreeHost(host)
		return nil, &OpError{Op: what, Msg: fmt.Sprintf("mapping host memory into %v", d), Err: err}
	}
	return &cudaMapped{d: d, what: what, host: host, dev: dev}, nil
}

func (m *cudaMapped) free() {
	if m == nil {
		return
	}
	if m.host != nil {
		_ = m.d.ctx.MemFreeHost(m.host)
		m.host = nil
	}
	m.freed = true
}

// live fails, under op's name with ErrReleased, once m was freed (nil:
// Go memory, always live).
func (m *cudaMapped) live(op string) error {
	if m != nil && m.freed {
		return &OpError{Op: op, Msg: fmt.Sprintf("the %s was released", m.what), Err: ErrReleased}
	}
	return nil
}

// beforeHostWrite waits for the device before the host writes a mapped
// block (nil: Go memory, nothing to wait for), so that work still queued
// reads what it was queued with. A freed block is an error.
func (m *cudaMapped) beforeHostWrite() error {
	if m == nil {
		return nil
	}
	if err := m.live(m.what); err != nil {
		return err
	}
	return m.d.Synchronize()
}

// argTable puts a kernel's argument table where the launches queued next
// can read it and returns its device address and a function to call once
// they are queued. Eagerly that is workspace memory, uploaded on the
// stream (table). While a graph is being captured it is a mapped host
// block that the graph keeps for its replays: the graph has no upload to
// replay, and a workspace block freed during capture is reused by later
// captured work.
func (d *cudaDevice) argTable(op string, rows []byte) (cuda.DevicePtr, func()) {
	if c := d.capturing(); c != nil {
		m, err := d.newMapped(op, len(rows))
		if err != nil {
			panic(err)
		}
		copy(unsafe.Slice((*byte)(m.host), len(rows)), rows)
		c.tables = append(c.tables, m)
		return m.dev, func() {}
	}
	tab := d.table(op, rows)
	return scratchPtr(tab), func() { freeScratch(tab) }
}

// launchTable launches fn over an argument table of rows (argTable) whose
// address set writes into the arguments, and frees the table after the
// launch, also when the launch fails (its panic goes on up).
func (d *cudaDevice) launchTable(op string, fn *cuda.Function, grid [3]uint32, rows []byte, set func(a *cuda.Args, tab cuda.DevicePtr)) {
	tab, done := d.argTable(op, rows)
	defer done() // the stream orders the table's reuse after the kernel
	d.launch(op, fn, grid, block1, func(a *cuda.Args) { set(a, tab) })
}

// clipGuarded is StepGuard.ClipGradNorm on the device: the sum of squares
// into the guard, clip_guard, then scale_guarded_f32 over the gradients
// (which returns at once when the factor is 1).
func (b cudaBackend) clipGuarded(g *StepGuard, ts []*Tensor, loss *Tensor, maxNorm float64) {
	d := b.d
	if err := g.cu.live("ClipGradNorm"); err != nil {
		panic(err)
	}
	has := b.sumSquaresInto(g.cu.dev, ts)
	d.launch("ClipGradNorm", d.k.clipGuard, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, func(a *cuda.Args) {
		a.Ptr(g.cu.dev).Ptr(devPtr(loss)).Float64(maxNorm).Int32(boolArg(has))
	})
	b.guardedGrads("ClipGradNorm", d.k.scaleGuarded, g, ts)
}

// guardedGrads launches fn(table, guard) over the gradients ts
// (tensorTableLaunch): scale_guarded_f32 and unscale_guarded_f32.
func (b cudaBackend) guardedGrads(op string, fn *cuda.Function, g *StepGuard, ts []*Tensor) {
	if err := g.cu.live(op); err != nil {
		panic(err)
	}
	b.tensorTableLaunch(op, fn, ts, func(a *cuda.Args, tab cuda.DevicePtr) { a.Ptr(tab).Ptr(g.cu.dev) })
}
