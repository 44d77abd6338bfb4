package memory

import (
	"fmt"
	"sync/atomic"
)

// Allocation is memory handed out by a Manager: a pool block plus the role
// it serves and the tier it landed in. Each Alloc hands out a new
// Allocation (Blocks are recycled, Allocations never are), so freeing one
// twice is always reported, never a silent free of someone else's memory.
//
// Its methods are safe from several goroutines, but Addr, Host, Tier and
// Advice read without the manager's lock (they are on every op's path):
// they must not run while Migrate, Free or the manager's Close changes
// the same allocation, as a slice must not be read while it is
// reassigned: a caller that migrates or frees an allocation does not
// read it from another goroutine meanwhile.
type Allocation struct {
	m      *Manager
	b      *Block // nil once freed
	size   int64
	op     string
	role   Role
	tier   Tier
	advice Advice
	label  string // SetLabel's name, under the manager's lock
	// spilled marks an allocation its placement's tier refused, counted in
	// the manager's spillLive until it is freed or migrated (spill.go).
	spilled bool
	// touches counts accesses (Touch), for the placement Scheduler.
	touches atomic.Int64
	// home is the stream it was allocated for, whose work uses it; after
	// MigrateOn its block may belong to the copy's stream instead.
	home Stream
}

// Alloc allocates size bytes for role on the default stream.
func (m *Manager) Alloc(size int64, role Role) (*Allocation, error) {
	return m.AllocStream(size, role, 0)
}

// AllocStream allocates size bytes for role, for work on stream s, in the
// tier the policy places the role in (or its fallback). Errors: size <= 0,
// an unknown role, or a role no backend can hold wrap ErrInvalidArgument;
// lack of memory is an *OOMError; a closed manager returns ErrClosed.
func (m *Manager) AllocStream(size int64, role Role, s Stream) (*Allocation, error) {
	return m.AllocOp(size, role, s, "")
}

// AllocOp is AllocStream for an allocation asked for by op (a tensor op's
// name, "matmul"): the name goes into the allocation history
// (RecordHistory), snapshots and leak reports, and Allocation.Op returns
// it. It costs nothing more than AllocStream; pass a constant string.
func (m *Manager) AllocOp(size int64, role Role, s Stream, op string) (*Allocation, error) {
	if role >= NumRoles {
		return nil, fmt.Errorf("memory: allocating %d bytes for unknown %s: %w", size, role, ErrInvalidArgument)
	}
	if size <= 0 {
		return nil, fmt.Errorf("memory: allocating %d bytes for role %s: size must be positive: %w", size, role, ErrInvalidArgument)
	}
	m.mu.Lock()
	a, err := m.alloc(size, role, s, op)
	if ev, hook := m.spillReport, m.allocHook; ev != nil || hook != nil {
		m.spillReport = nil
		fn := m.onSpill
		m.mu.Unlock()
		if ev != nil {
			m.report(ev, fn)
		}
		if hook != nil && err == nil {
			hook(a)
		}
		return a, err
	}
	m.mu.Unlock()
	return a, err
}

// OnAlloc sets a function called after every successful allocation,
// without the manager's lock held, on the allocating goroutine (nil: none):
// for measurements that must follow every op, such as sampling the
// device's memory in use (examples/memstrategies). It costs a nil test per
// allocation when unset.
func (m *Manager) OnAlloc(fn func(*Allocation)) {
	m.mu.Lock()
	m.allocHook = fn
	m.mu.Unlock()
}

// alloc is AllocStream with m.mu held.
func (m *Manager) alloc(size int64, role Role, s Stream, op string) (*Allocation, error) {
	if m.closed {
		return nil, fmt.Errorf("memory: manager: alloc after close: %w", ErrClosed)
	}
	t := m.route[role]
	pl := m.policy.Placements[role]
	if t == noTier {
		return nil, fmt.Errorf("memory: no backend for role %s: the policy places it on %s, and neither that tier nor its fallbacks have a backend: %w",
			role, pl.Tier, ErrInvalidArgument)
	}
	if armedFault.Load() != nil { // fault.go
		if err := m.injectedFault(size, t); err != nil {
			return nil, err
		}
	}
	advice := m.placedAdvice(role, t) // none when it fell back out of managed memory
	b, err := m.pools[t].alloc(size, s, advice, role, op)
	spilled := false
	if err != nil {
		if b, t, err = m.spill(err, t, size, s, role, op); err != nil {
			return nil, err
		}
		advice, spilled = 0, true
	}
	u := &m.roles[role]
	u.Allocated.add(b.size)
	u.Requested.add(size)
	u.Allocs++
	m.live++
	a := m.newAllocation()
	*a = Allocation{m: m, b: b, size: size, op: op, role: role, tier: t, advice: advice, spilled: spilled, home: s}
	if m.sched != nil {
		m.sched.onAlloc(a)
	}
	return a, nil
}

// allocationSlab is how many Allocations the manager makes at once.
const allocationSlab = 64

// newAllocation returns a never-used Allocation, cut from a slab made
// allocationSlab at a time: one Go allocation per 64 Allocs instead of
// one per Alloc. Slots are never reused (the slab is dropped when cut up,
// and the garbage collector frees it once none of its Allocations is
// reachable), so a stale *Allocation can never free another's memory: its
// block stays nil after its Free. The price is that one reachable
// Allocation keeps its slab's 2 KiB alive.
func (m *Manager) newAllocation() *Allocation {
	if len(m.slab) == 0 {
		m.slab = make([]Allocation, allocationSlab)
	}
	a := &m.slab[0]
	m.slab = m.slab[1:]
	return a
}

// Free returns a to its pool. Freeing it twice, or one from another
// manager, wraps ErrDoubleFree; after Close (the manager's, or its
// pool's own) it returns ErrClosed.
func (m *Manager) Free(a *Allocation) error {
	if a == nil {
		return fmt.Errorf("memory: manager: free of a nil allocation: %w", ErrInvalidArgument)
	}
	m.mu.Lock()
	err := m.free(a)
	m.mu.Unlock()
	return err
}

// free is Free with m.mu held.
func (m *Manager) free(a *Allocation) error {
	if a.m != m {
		return fmt.Errorf("memory: manager: free of an allocation of %s for %s made by another manager: %w",
			FormatBytes(a.size), a.role, ErrDoubleFree)
	}
	if m.closed {
		return fmt.Errorf("memory: manager: free after close: %w", ErrClosed)
	}
	b := a.b
	if b == nil {
		return fmt.Errorf("memory: manager: allocation of %s for %s on %s freed twice: %w",
			FormatBytes(a.size), a.role, a.tier, ErrDoubleFree)
	}
	if m.pools[a.tier].closed { // closed on its own (Pool.Close): b is dead
		return closedPoolError(a, "free")
	}
	if b.state != blockLive || !b.ownedBy(m.pools[a.tier]) {
		return fmt.Errorf("memory: manager: the block of an allocation of %s for %s was freed behind the manager's back: %w",
			FormatBytes(a.size), a.role, ErrDoubleFree)
	}
	rounded, requested := b.size, b.requested
	err := m.pools[a.tier].free(b)
	if b.state == blockLive {
		return err // not freed
	}
	// Freed, though possibly with an error (a block used on other streams
	// whose events could not be recorded is quarantined).
	a.b = nil
	if a.label != "" {
		delete(m.labeled, b)
	}
	m.unspill(a)
	if m.sched != nil {
		m.sched.onFree(a)
	}
	u := &m.roles[a.role]
	u.Allocated.sub(rounded)
	u.Requested.sub(requested)
	u.Frees++
	m.live--
	return err
}

// RecordStream notes that a is used by work queued on stream s as well as
// on the stream it was allocated for; see Pool.RecordStream. It needs the
// manager's Config.StreamSync for streams other than a's own.
func (m *Manager) RecordStream(a *Allocation, s Stream) error {
	b, err := m.liveBlock(a, "RecordStream")
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	return m.pools[a.tier].recordStream(b, s)
}

// Prefetch migrates a managed allocation's pages to the device, ordered on
// stream s: for data filled from the host after it was allocated (frozen
// weights loaded from a checkpoint), before kernels read it. Allocations
// in other tiers, or in a managed tier whose backend takes no advice (host
// memory standing in for it), need nothing and return nil.
func (m *Manager) Prefetch(a *Allocation, s Stream) error {
	b, err := m.liveBlock(a, "Prefetch")
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	if a.tier != TierManaged {
		return nil
	}
	return m.pools[a.tier].prefetch(b, s)
}

// liveBlock locks m and returns a's block; on error m is unlocked.
func (m *Manager) liveBlock(a *Allocation, op string) (*Block, error) {
	if a == nil {
		return nil, fmt.Errorf("memory: manager: %s of a nil allocation: %w", op, ErrInvalidArgument)
	}
	m.mu.Lock()
	var err error
	switch {
	case a.m != m:
		err = fmt.Errorf("memory: manager: %s of an allocation of %s for %s made by another manager: %w", op, FormatBytes(a.size), a.role, ErrDoubleFree)
	case m.closed:
		err = fmt.Errorf("memory: manager: %s after close: %w", op, ErrClosed)
	case a.b == nil:
		err = fmt.Errorf("memory: manager: %s of a freed allocation of %s for %s: %w", op, FormatBytes(a.size), a.role, ErrDoubleFree)
	case m.pools[a.tier].closed:
		err = closedPoolError(a, op)
	}
	if err != nil {
		m.mu.Unlock()
		return nil, err
	}
	return a.b, nil
}

// closedPoolError is the error of op on a whose pool was closed on its
// own (Pool.Close): its block was released as leaked and is dead, so
// nothing may read, move or record it (a Migrate copied from address 0).
func closedPoolError(a *Allocation, op string) error {
	return fmt.Errorf("memory: manager: %s of an allocation of %s for %s after its %s pool was closed: %w",
		op, FormatBytes(a.size), a.role, a.tier, ErrClosed)
}

// Free returns the allocation to its manager; see Manager.Free.
func (a *Allocation) Free() error {
	if a == nil || a.m == nil {
		return fmt.Errorf("memory: free of an allocation no manager made: %w", ErrDoubleFree)
	}
	return a.m.Free(a)
}

// The methods of Allocation are safe on a nil *Allocation, as Free is:
// they return zero values ("" and 0; Free, ErrDoubleFree), and Touch and
// SetLabel do nothing.

// Addr is the address for the tier's device; 0 once freed (or for nil).
func (a *Allocation) Addr() uintptr {
	if a == nil || a.b == nil {
		return 0
	}
	return a.b.Addr()
}

// Host is the CPU view of exactly Size bytes, nil when the tier is not
// host-accessible or the allocation is freed. The bytes are not zeroed.
func (a *Allocation) Host() []byte {
	if a == nil || a.b == nil {
		return nil
	}
	return a.b.Host()
}

// Size is the requested size in bytes.
func (a *Allocation) Size() int64 {
	if a == nil {
		return 0
	}
	return a.size
}

// Manager is the manager that made a.
func (a *Allocation) Manager() *Manager {
	if a == nil {
		return nil
	}
	return a.m
}

// Stream is the pool stream a's block belongs to (0 once freed, or for an
// Allocation no manager made).
func (a *Allocation) Stream() Stream {
	if a == nil || a.m == nil {
		return 0
	}
	a.m.mu.Lock()
	defer a.m.mu.Unlock()
	if a.b == nil {
		return 0
	}
	return a.b.seg.stream
}

// Op is the name of the op that asked for the allocation (AllocOp), or "".
func (a *Allocation) Op() string {
	if a == nil {
		return ""
	}
	return a.op
}

// Role is the role the allocation was made for.
func (a *Allocation) Role() Role {
	if a == nil {
		return 0
	}
	return a.role
}

// Tier is the tier the allocation landed in (after any fallback).
func (a *Allocation) Tier() Tier {
	if a == nil {
		return 0
	}
	return a.tier
}

// Advice is the managed-memory advice of the role's placement when the
// allocation was made or last moved, 0 unless it is in TierManaged (a
// spill into it takes none). The pool applied it to the allocation's pages
// when its backend takes advice (the CUDA managed backend; see Adviser).
func (a *Allocation) Advice() Advice {
	if a == nil {
		return 0
	}
	return a.advice
}
