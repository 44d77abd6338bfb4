package memory

import (
	"fmt"
)

// CopyFunc copies n bytes from src to dst, both addresses of the tiers'
// devices, ordered on stream s: what Manager.Migrate moves an allocation's
// bytes with. NewCUDAManager installs cuMemcpyDtoDAsync (every CUDA tier's
// Addr is a device address under unified addressing); other managers copy
// through the host views.
type CopyFunc func(dst, src uintptr, n int64, s Stream) error

// SetCopy replaces the function Migrate and MigrateOn copy with, for
// every pair of tiers (nil: host views): the CUDA manager's copies of
// page-locked memory by its host pointer stop too.
func (m *Manager) SetCopy(fn CopyFunc) {
	m.mu.Lock()
	m.copyFn, m.pinned = fn, nil
	m.mu.Unlock()
}

// crossUsed reports whether b is used on streams other than its own
// (RecordStream): Migrate cannot move it.
func (b *Block) crossUsed() bool { return b.cross != nil && len(b.cross.uses) > 0 }

// SetMigrateBarrier installs fn, which Migrate calls before it copies an
// allocation, with the stream the copy is ordered on: the place to order
// that stream after work of other streams that may still write the
// allocation without the pool knowing (the tensor layer's side stream,
// which updates parameters and optimizer state while the next forward
// pass runs: they are long-lived, so no RecordStream covers them). fn is
// called with the manager's mutex held and must not call back into it;
// an error fails the migration (nothing moves). nil removes it.
func (m *Manager) SetMigrateBarrier(fn func(s Stream) error) {
	m.mu.Lock()
	m.barrier = fn
	m.mu.Unlock()
}

// Touch records one access to a's bytes: the tensor layer calls it for
// every operand of every op, so that a Scheduler knows how often each
// tracked allocation is used a step. It is an atomic add.
func (a *Allocation) Touch() {
	if a != nil {
		a.touches.Add(1)
	}
}

// Touches is how many times a was touched since it was made.
func (a *Allocation) Touches() int64 {
	if a == nil {
		return 0
	}
	return a.touches.Load()
}

// SetLabel names a for plans, snapshots (BlockInfo.Label) and leak
// reports (a parameter's name, "adamw.m:" and the name); the op that made
// it stays in Op. "" removes the name.
func (a *Allocation) SetLabel(s string) {
	if a == nil || a.m == nil {
		return
	}
	m := a.m
	m.mu.Lock()
	a.label = s
	if a.b != nil && !m.closed {
		if s == "" {
			delete(m.labeled, a.b)
		} else {
			if m.labeled == nil {
				m.labeled = map[*Block]*Allocation{}
			}
			m.labeled[a.b] = a
		}
	}
	m.mu.Unlock()
}

// Label is the name SetLabel gave a, or "".
func (a *Allocation) Label() string {
	if a == nil || a.m == nil {
		return ""
	}
	a.m.mu.Lock()
	defer a.m.mu.Unlock()
	return a.label
}

// Migrate moves a's bytes to tier t (after fallback, as the policy's
// placements fall back): a new block there, a copy ordered on a's stream,
// and the old block freed to its pool, which reuses it only for work
// queued after the copy. The Allocation keeps its identity, so holders see
// the new address at their next Addr or Host; work already queued on a's
// stream reads the old bytes before the copy, as stream order says, but
// the caller must not hold Addr or Host values across the call, nor
// migrate an allocation another stream is using. Moving to the tier a is
// in does nothing. Out of memory in t is an *OOMError; a stays put.
func (m *Manager) Migrate(a *Allocation, t Tier) error {
	if t >= NumTiers {
		return fmt.Errorf("memory: Migrate to unknown %s: %w", t, ErrInvalidArgument)
	}
	old, err := m.liveBlock(a, "Migrate")
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	return m.migrate(a, old, t)
}

// migrate is Migrate with m.mu held and a's block old.
func (m *Manager) migrate(a *Allocation, old *Block, t Tier) error {
	if t = m.backed(t); t == noTier {
		return fmt.Errorf("memory: Migrate of %s for %s: no backend down the fallback chain: %w", FormatBytes(a.size), a.role, ErrInvalidArgument)
	}
	if t == a.tier {
		return nil
	}
	if m.pools[a.tier].closed { // the Scheduler's moves come here without liveBlock
		return closedPoolError(a, "Migrate")
	}
	if old.crossUsed() {
		return fmt.Errorf("memory: Migrate of %s for %s: it is used on other streams (RecordStream): %w", FormatBytes(a.size), a.role, ErrInvalidArgument)
	}
	if m.barrier != nil {
		if err := m.barrier(old.Stream()); err != nil {
			return fmt.Errorf("memory: Migrate of %s for %s: ordering the copy after other streams: %w", FormatBytes(a.size), a.role, err)
		}
	}
	nb, err := m.pools[t].alloc(a.size, old.Stream(), m.placedAdvice(a.role, t), a.role, a.op)
	if err != nil {
		return err
	}
	if err := m.copyBetween(nb, old, t, a.tier, a.size, old.Stream()); err != nil {
		_ = m.pools[t].free(nb)
		return fmt.Errorf("memory: Migrate of %s for %s from %s to %s: %w", FormatBytes(a.size), a.role, a.tier, t, err)
	}
	return m.rehome(a, old, nb, t, &m.migrations)
}

// placedAdvice is the advice a block for role gets in tier t: its
// placement's in the managed tier (an embedding moved out and back gets
// its advice again, as when it was allocated there), none elsewhere.
func (m *Manager) placedAdvice(role Role, t Tier) Advice {
	if t != TierManaged {
		return 0
	}
	return m.policy.Placements[role].Advice
}

// rehome frees a's old block and makes nb, in tier t and holding a copy
// of a's bytes, its block, counting the move in moved; when old cannot be
// freed, nb is and a stays. When old is freed with an error (used on
// other streams, whose events could not all be recorded: quarantined
// until Close, as Free reports), a moves and the error is returned. With
// m.mu held.
func (m *Manager) rehome(a *Allocation, old, nb *Block, t Tier, moved *Moved) error {
	u := &m.roles[a.role]
	u.Allocated.sub(old.size)
	from, ferr := a.tier, m.pools[a.tier].free(old)
	if ferr != nil && old.state == blockLive {
		_ = m.pools[t].free(nb)
		u.Allocated.add(old.size)
		return ferr
	}
	u.Allocated.add(nb.size)
	if a.label != "" {
		delete(m.labeled, old)
		m.labeled[nb] = a
	}
	a.b, a.tier, a.advice = nb, t, m.placedAdvice(a.role, t)
	m.unspill(a) // placed on purpose now: no longer an overflow
	moved.Count++
	moved.Bytes += a.size
	if m.sched != nil {
		m.sched.onGrow()
	}
	if ferr != nil {
		return fmt.Errorf("memory: %s for %s moved from %s to %s, but freeing its old block failed: %w", FormatBytes(a.size), a.role, from, t, ferr)
	}
	return nil
}

// copyBytes copies n bytes from block src to block dst through their host
// views (copyBetween's last resort).
func (m *Manager) copyBytes(dst, src *Block, n int64) error {
	d, s := dst.Host(), src.Host()
	if int64(len(d)) < n || int64(len(s)) < n {
		return fmt.Errorf("no copy function and no host view of both tiers: %w", ErrInvalidArgument)
	}
	copy(d[:n], s[:n])
	return nil
}
