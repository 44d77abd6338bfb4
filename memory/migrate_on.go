package memory

import (
	"fmt"
	"slices"
)

// MigrateOn is Migrate with the copy queued on stream s instead of a's
// own stream: a copy engine moves the bytes while a's stream goes on
// computing (activation offload: tensor.MoveTo, checkpoint.Offload). The
// caller must have ordered s after the work that writes a (an event of a's
// stream waited for on s) and must order any later use of a after the
// copy (an event of s waited for on the user's stream).
//
// The new block comes from s's own segments of tier t and is recorded as
// used on the stream a was allocated for (its home, RecordStream): the
// blocks that moves bring in recur every step with the same sizes, and
// are kept apart from the home stream's segments, where the compute's
// activations come and go in another order (on the H200, session 16:
// float32 gpt2 offloaded under half the device's peak went from 0.87x to
// 0.92x the device row's speed; without a budget the classic pool still
// reserved about twice its peak). Freed, the new block waits for the home
// stream's work before s reuses it. The old
// block is recorded as used on s and freed, so its pool reuses it only
// once the copy has read it. An allocation used on streams other than s
// and its home is refused, as Migrate refuses one used on other streams.
// Unlike Migrate it does not call the migrate barrier: the caller's
// ordering of s is the barrier. It needs a StreamSync when s is not a's
// stream; s == a's home stream is Migrate without the barrier.
// Out of memory in t is an *OOMError; a stays put. When the old block's
// event on s cannot be recorded, the block is quarantined (as Free
// reports) and the error is returned with a moved.
func (m *Manager) MigrateOn(a *Allocation, t Tier, s Stream) error {
	if t >= NumTiers {
		return fmt.Errorf("memory: MigrateOn to unknown %s: %w", t, ErrInvalidArgument)
	}
	old, err := m.liveBlock(a, "MigrateOn")
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	if t = m.backed(t); t == noTier {
		return fmt.Errorf("memory: MigrateOn of %s for %s: no backend down the fallback chain: %w", FormatBytes(a.size), a.role, ErrInvalidArgument)
	}
	if t == a.tier {
		return nil
	}
	own, home := old.Stream(), a.home
	if old.cross != nil && slices.ContainsFunc(old.cross.uses, func(u Stream) bool { return u != s && u != home }) {
		return fmt.Errorf("memory: MigrateOn of %s for %s: it is used on streams other than the copy's and its own (RecordStream): %w", FormatBytes(a.size), a.role, ErrInvalidArgument)
	}
	// The source is held for s before anything is queued: once the copy
	// is, a failure to hold it would leave the pool free to reuse it under
	// the copy. A record made here is taken back when the move fails
	// before the copy is queued: a stays put as it was, and Migrate (the
	// scheduler's) may still move it.
	held := old.cross != nil && slices.Contains(old.cross.uses, s)
	if s != own {
		if err := m.pools[a.tier].recordStream(old, s); err != nil {
			return fmt.Errorf("memory: MigrateOn of %s for %s: %w", FormatBytes(a.size), a.role, err)
		}
	}
	unhold := func() {
		if s != own && !held {
			m.pools[a.tier].unrecordStream(old, s)
		}
	}
	nb, err := m.pools[t].alloc(a.size, s, m.placedAdvice(a.role, t), a.role, a.op)
	if err != nil {
		unhold()
		return err
	}
	if s != home {
		if err := m.pools[t].recordStream(nb, home); err != nil {
			_ = m.pools[t].free(nb)
			unhold()
			return fmt.Errorf("memory: MigrateOn of %s for %s: %w", FormatBytes(a.size), a.role, err)
		}
	}
	if err := m.copyBetween(nb, old, t, a.tier, a.size, s); err != nil {
		_ = m.pools[t].free(nb) // held for the home stream: reused only after its work
		return fmt.Errorf("memory: MigrateOn of %s for %s from %s to %s: %w", FormatBytes(a.size), a.role, a.tier, t, err)
	}
	return m.rehome(a, old, nb, t, &m.asyncMoves)
}
