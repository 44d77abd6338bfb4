package gorgonia

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	gt "gorgonia.org/tensor"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// ErrInaccessible is wrapped by errors about memory the CPU cannot address
// (plain device memory): Accessible, FromDense of a Dense placed there, and
// copies or fills of it by an Engine without a CUDA context.
var ErrInaccessible = errors.New("memory is not host-accessible")

// Engine is a gorgonia.org/tensor Engine whose memory comes from a strata
// memory.Manager: every allocation is made for one Role, so the manager's
// policy puts it in a tier (host, device, managed or staging memory) and
// its statistics count it. The arithmetic is gorgonia's standard engine
// (StdEng, embedded), which works on memory the CPU can address. See the
// package documentation. Make one with NewEngine: the zero value has no
// manager, and its methods return errors wrapping
// memory.ErrInvalidArgument.
type Engine struct {
	gt.StdEng

	m          *memory.Manager
	role       memory.Role
	ctx        *cuda.Context // nil: device memory can be allocated but not read or written
	accessible bool          // the role's tier is host-accessible (AllocAccessible)

	mu   sync.Mutex
	live []span // live allocations, by address
}

// span is one live allocation of an Engine.
type span struct {
	addr uintptr // the host address when host-accessible, else the device address
	size int64
	host []byte // the CPU view, nil for device memory
	a    *memory.Allocation
}

// block is the gt.Memory that Alloc returns.
type block struct{ addr, size uintptr }

func (b block) Uintptr() uintptr { return b.addr }
func (b block) MemSize() uintptr { return b.size }

// NewEngine returns an Engine that allocates from m for role. ctx is the
// CUDA context of m's device memory, which Memset, Memclr and Memcpy use
// for memory the CPU cannot address; pass nil for a host manager.
//
// To learn whether the role's tier is host-accessible (AllocAccessible),
// NewEngine allocates one byte for role and frees it at once; that also
// reports, as an error, a role that no tier of m can hold.
func NewEngine(m *memory.Manager, role memory.Role, ctx *cuda.Context) (*Engine, error) {
	if m == nil {
		return nil, fmt.Errorf("gorgonia: NewEngine: nil *memory.Manager: %w", memory.ErrInvalidArgument)
	}
	probe, err := m.Alloc(1, role)
	if err != nil {
		return nil, fmt.Errorf("gorgonia: NewEngine for role %s: %w", role, err)
	}
	accessible := probe.Host() != nil
	if err := probe.Free(); err != nil {
		return nil, fmt.Errorf("gorgonia: NewEngine for role %s: %w", role, err)
	}
	return &Engine{m: m, role: role, ctx: ctx, accessible: accessible}, nil
}

// made refuses an Engine that NewEngine did not make (the zero value, or
// nil): it has no manager.
func (e *Engine) made(op string) error {
	if e == nil || e.m == nil {
		return fmt.Errorf("gorgonia: Engine.%s: an Engine not made by NewEngine: %w", op, memory.ErrInvalidArgument)
	}
	return nil
}

// Manager is the manager the engine allocates from.
func (e *Engine) Manager() *memory.Manager { return e.m }

// Role is the role of every allocation the engine makes.
func (e *Engine) Role() memory.Role { return e.role }

// AllocAccessible reports whether Alloc returns memory the CPU can address:
// whether the tier the manager placed the engine's role in, when the
// engine was made, is host-accessible. gorgonia marks a Dense made with
// an engine that says false as natively inaccessible, and its operations
// refuse to read it.
func (e *Engine) AllocAccessible() bool { return e.accessible }

// NonStdAlloc marks the engine as allocating outside Go's heap, so gorgonia
// flags its tensors as manually managed: the memory stays allocated until
// Free.
func (e *Engine) NonStdAlloc() {}

// WorksWith reports true: the engine moves bytes and leaves the data order
// to gorgonia, as its standard engine does.
func (e *Engine) WorksWith(gt.DataOrder) bool { return true }

// Alloc allocates size bytes from the manager for the engine's role (0
// bytes, for a Dense of no elements, is an empty block that Free accepts).
// It fails with the manager's error (size < 0, out of memory, closed
// manager), and with ErrInaccessible when the engine promised host memory
// (AllocAccessible) but the manager's policy has since moved its role to a
// tier the CPU cannot address: make a new Engine then.
func (e *Engine) Alloc(size int64) (gt.Memory, error) {
	if err := e.made("Alloc"); err != nil {
		return nil, err
	}
	if size == 0 {
		// A Dense of no elements (shape (0, n)), which gorgonia's standard
		// engine makes: no memory, nothing to free.
		return block{}, nil
	}
	a, err := e.m.Alloc(size, e.role)
	if err != nil {
		return nil, fmt.Errorf("gorgonia: Engine.Alloc: %w", err)
	}
	sp := span{addr: a.Addr(), size: size, host: a.Host(), a: a}
	if sp.host != nil {
		sp.addr = uintptr(unsafe.Pointer(unsafe.SliceData(sp.host)))
	} else if e.accessible {
		_ = a.Free()
		return nil, fmt.Errorf("gorgonia: Engine.Alloc: role %s now lands in %s memory, but the engine promised host-accessible memory: %w",
			e.role, a.Tier(), ErrInaccessible)
	}
	e.mu.Lock()
	i, _ := slices.BinarySearchFunc(e.live, sp.addr, func(s span, addr uintptr) int { return cmpAddr(s.addr, addr) })
	e.live = slices.Insert(e.live, i, sp)
	e.mu.Unlock()
	return block{sp.addr, uintptr(size)}, nil
}

// Free gives back the allocation that starts at mem's address (the memory
// Alloc returned, or a *gt.Dense made with the engine); size must be its
// size in bytes (the Dense's MemSize). Memory the engine did not allocate,
// or already freed, is an error wrapping memory.ErrDoubleFree; a wrong
// size one wrapping memory.ErrInvalidArgument. The Dense must not be used
// afterwards.
func (e *Engine) Free(mem gt.Memory, size int64) error {
	if err := e.made("Free"); err != nil {
		return err
	}
	if isNil(mem) {
		return fmt.Errorf("gorgonia: Engine.Free of nil memory: %w", memory.ErrInvalidArgument)
	}
	if size == 0 && mem.MemSize() == 0 {
		return nil // Alloc(0)'s empty block
	}
	addr := mem.Uintptr()
	e.mu.Lock()
	i, found := slices.BinarySearchFunc(e.live, addr, func(s span, addr uintptr) int { return cmpAddr(s.addr, addr) })
	if !found {
		e.mu.Unlock()
		return fmt.Errorf("gorgonia: Engine.Free: no live allocation of this engine starts at %#x (freed already, a view, or another engine's memory): %w",
			addr, memory.ErrDoubleFree)
	}
	sp := e.live[i]
	if sp.size != size {
		e.mu.Unlock()
		return fmt.Errorf("gorgonia: Engine.Free: %d bytes at %#x, but %d were allocated there: %w", size, addr, sp.size, memory.ErrInvalidArgument)
	}
	e.live = slices.Delete(e.live, i, i+1)
	e.mu.Unlock()
	if err := sp.a.Free(); err != nil {
		return fmt.Errorf("gorgonia: Engine.Free: %w", err)
	}
	return nil
}

// Accessible returns mem when the CPU can address it: memory of this
// engine in a host-accessible tier, or a gorgonia tensor's Go memory. For
// device memory it returns an error wrapping ErrInaccessible; copy the
// data to host memory with Memcpy instead.
func (e *Engine) Accessible(mem gt.Memory) (gt.Memory, error) {
	r, err := e.locate("Accessible", mem)
	if err != nil {
		return nil, err
	}
	if r.host == nil && r.size > 0 {
		return nil, fmt.Errorf("gorgonia: Engine.Accessible: %d bytes of device memory at %#x: %w", r.size, mem.Uintptr(), ErrInaccessible)
	}
	return mem, nil
}

// region is where a gt.Memory's bytes are: a CPU view, or device memory.
type region struct {
	host []byte         // the bytes, when the CPU can address them
	dev  cuda.DevicePtr // else their device address
	size int64
}

// locate finds mem's bytes: inside one of the engine's live allocations,
// or else in the Go memory of a gorgonia tensor (anything with a Data
// method returning a slice of numbers or bools, as *gt.Dense has).
func (e *Engine) locate(op string, mem gt.Memory) (region, error) {
	if err := e.made(op); err != nil {
		return region{}, err
	}
	if isNil(mem) {
		return region{}, fmt.Errorf("gorgonia: Engine.%s of nil memory: %w", op, memory.ErrInvalidArgument)
	}
	size := int64(mem.MemSize())
	if size == 0 {
		return region{}, nil
	}
	addr := mem.Uintptr()
	e.mu.Lock()
	i, found := slices.BinarySearchFunc(e.live, addr, func(s span, addr uintptr) int { return cmpAddr(s.addr, addr) })
	if !found {
		i-- // the allocation below addr, which may contain it
	}
	var sp span
	if i >= 0 {
		sp = e.live[i]
	}
	e.mu.Unlock()
	if i >= 0 && addr-sp.addr < uintptr(sp.size) {
		off := int64(addr - sp.addr)
		if off+size > sp.size {
			return region{}, fmt.Errorf("gorgonia: Engine.%s: %d bytes at %#x run past the end of the %d-byte allocation at %#x: %w",
				op, size, addr, sp.size, sp.addr, memory.ErrInvalidArgument)
		}
		if sp.host != nil {
			return region{host: sp.host[off : off+size], size: size}, nil
		}
		return region{dev: cuda.DevicePtr(addr), size: size}, nil
	}
	b, ok := goBytes(mem)
	if !ok || int64(len(b)) != size {
		return region{}, fmt.Errorf("gorgonia: Engine.%s: %T at %#x is neither memory of this engine nor a gorgonia tensor's numbers: %w",
			op, mem, addr, memory.ErrInvalidArgument)
	}
	return region{host: b, size: size}, nil
}

// isNil reports whether mem is nil or holds a nil pointer (a nil
// *gt.Dense), whose MemSize and Uintptr would dereference it.
func isNil(mem gt.Memory) bool {
	if mem == nil {
		return true
	}
	v := reflect.ValueOf(mem)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func cmpAddr(a, b uintptr) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
