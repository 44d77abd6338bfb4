package main

import (
	"fmt"
	"math"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// allocator is one way of getting and returning memory, timed by the
// workloads. It keeps its own table of handles, indexed by slot, so that
// every allocator pays the same (one interface call per operation) and
// none boxes a handle per call.
type allocator interface {
	name() string
	alloc(slot int, size int64) error
	free(slot int) error
	// sync waits for work the allocator queued without waiting (the
	// stream-ordered allocator); part of the timed region.
	sync() error
	// backendAllocs is how many times the allocator asked the driver or
	// the OS for memory so far, -1 when it always does.
	backendAllocs() int64
	close() error
}

// poolAlloc is memory.Pool over a backend: the caching allocator itself.
type poolAlloc struct {
	p      *memory.Pool
	blocks []*memory.Block
	label  string
}

func newPoolAlloc(label string, b memory.Backend, cfg memory.PoolConfig, slots int) *poolAlloc {
	return &poolAlloc{p: memory.NewPool(b, cfg), blocks: make([]*memory.Block, slots), label: label}
}

func (a *poolAlloc) name() string { return a.label }

func (a *poolAlloc) alloc(slot int, size int64) error {
	b, err := a.p.Alloc(size, 0)
	a.blocks[slot] = b
	return err
}

func (a *poolAlloc) free(slot int) error {
	err := a.p.Free(a.blocks[slot])
	a.blocks[slot] = nil
	return err
}

func (a *poolAlloc) sync() error          { return nil }
func (a *poolAlloc) backendAllocs() int64 { return a.p.Stats().BackendAllocs }
func (a *poolAlloc) close() error         { return a.p.Close() }

// managerAlloc is Manager.Alloc for activations: the pool plus role
// accounting and a new Allocation handle per call.
type managerAlloc struct {
	m      *memory.Manager
	allocs []*memory.Allocation
	label  string
}

func newManagerAlloc(label string, m *memory.Manager, slots int) *managerAlloc {
	return &managerAlloc{m: m, allocs: make([]*memory.Allocation, slots), label: label}
}

func (a *managerAlloc) name() string { return a.label }

func (a *managerAlloc) alloc(slot int, size int64) error {
	x, err := a.m.Alloc(size, memory.RoleActivation)
	a.allocs[slot] = x
	return err
}

func (a *managerAlloc) free(slot int) error {
	err := a.allocs[slot].Free()
	a.allocs[slot] = nil
	return err
}

func (a *managerAlloc) sync() error          { return nil }
func (a *managerAlloc) backendAllocs() int64 { return a.m.Stats().Total.BackendAllocs }
func (a *managerAlloc) close() error         { return a.m.Close() }

// rawAlloc is cuMemAlloc and cuMemFree, every time.
type rawAlloc struct {
	c    *cuda.Context
	ptrs []cuda.DevicePtr
}

func (a *rawAlloc) name() string { return "cuMemAlloc" }

func (a *rawAlloc) alloc(slot int, size int64) error {
	p, err := a.c.MemAlloc(int(size))
	a.ptrs[slot] = p
	return err
}

func (a *rawAlloc) free(slot int) error {
	err := a.c.MemFree(a.ptrs[slot])
	a.ptrs[slot] = 0
	return err
}

func (a *rawAlloc) sync() error          { return nil }
func (a *rawAlloc) backendAllocs() int64 { return -1 }
func (a *rawAlloc) close() error         { return nil }

// asyncAlloc is cuMemAllocAsync and cuMemFreeAsync on one stream, from
// the device's default pool with its release threshold raised to the
// maximum, as PyTorch's cudaMallocAsync backend sets it: freed memory
// stays cached across synchronisations. Like its users, the workloads do
// not synchronise per pair; sync waits once at the end of a timed run.
type asyncAlloc struct {
	c    *cuda.Context
	s    *cuda.Stream
	ptrs []cuda.DevicePtr
}

func newAsyncAlloc(c *cuda.Context, slots int) (*asyncAlloc, error) {
	if !c.Properties().MemoryPoolsSupported {
		return nil, fmt.Errorf("%s does not support stream-ordered memory pools", c.Device())
	}
	s, err := c.NewStream()
	if err != nil {
		return nil, err
	}
	if err := c.SetMemPoolReleaseThreshold(math.MaxUint64); err != nil {
		return nil, err
	}
	return &asyncAlloc{c: c, s: s, ptrs: make([]cuda.DevicePtr, slots)}, nil
}

func (a *asyncAlloc) name() string { return "cuMemAllocAsync" }

func (a *asyncAlloc) alloc(slot int, size int64) error {
	p, err := a.c.MemAllocAsync(int(size), a.s)
	a.ptrs[slot] = p
	return err
}

func (a *asyncAlloc) free(slot int) error {
	err := a.c.MemFreeAsync(a.ptrs[slot], a.s)
	a.ptrs[slot] = 0
	return err
}

func (a *asyncAlloc) sync() error          { return a.s.Synchronize() }
func (a *asyncAlloc) backendAllocs() int64 { return -1 }

// close restores the default release threshold and gives the cached
// memory back.
func (a *asyncAlloc) close() error {
	if err := a.s.Synchronize(); err != nil {
		return err
	}
	if err := a.c.SetMemPoolReleaseThreshold(0); err != nil {
		return err
	}
	if err := a.c.MemPoolTrimTo(0); err != nil {
		return err
	}
	return a.s.Destroy()
}
