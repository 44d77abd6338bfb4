package memory

import (
	"errors"
	"fmt"
	"os"
)

// Spilling: under a Policy with Spill set (HybridPolicy), an allocation
// that the device tier cannot serve — its budget (Config.Limits, SetLimit)
// or the device itself is full even after the pool released its cache —
// is placed in TierOffload instead of failing: host-resident memory the
// GPU reads over the bus. Training goes on, slower, where a plain
// allocator stops; the first spill is reported (OnSpill, else one line on
// standard error) with the bytes involved, and Stats.Spills counts all.
// Without an offload backend the chain falls back to staging memory
// (pinned, also read by the device over the bus); never to plain host
// memory on a GPU, which kernels cannot reach.

// Moved counts allocations that went to another tier than their
// placement's: spills, and migrations by Migrate and the Scheduler.
type Moved struct {
	// Count and Bytes (requested) of the allocations moved so far.
	Count, Bytes int64
}

// SpillEvent describes an allocation that spilled.
type SpillEvent struct {
	Role     Role
	Op       string // the op that asked, when known
	Size     int64  // bytes requested
	From, To Tier
	Cause    error // why From refused it
}

// String is the report printed for the first spill.
func (e SpillEvent) String() string {
	op := ""
	if e.Op != "" {
		op = " (op " + e.Op + ")"
	}
	return fmt.Sprintf("memory: %s for %s%s did not fit the %s tier (%v); it and later overflow go to %s memory, which the device reaches over the bus: training goes on, slower (Stats().Spills counts them)",
		FormatBytes(e.Size), e.Role, op, e.From, e.Cause, e.To)
}

// OnSpill sets the function told about the first allocation that spills
// (nil: print SpillEvent.String to standard error). It is called without
// the manager's lock held, on the allocating goroutine.
func (m *Manager) OnSpill(fn func(SpillEvent)) {
	m.mu.Lock()
	m.onSpill = fn
	m.mu.Unlock()
}

// spillTier is the tier an allocation refused by from spills to, or
// noTier: the first tier with a backend down the chain from TierOffload,
// but neither from itself nor plain host memory on a manager whose device
// tier is not host memory standing in for it.
func (m *Manager) spillTier(from Tier) Tier {
	if !m.policy.Spill {
		return noTier
	}
	return m.spillDest(from)
}

// spillDest is spillTier under a spilling policy: where the device tier's
// overflow goes on this manager (noTier: nowhere).
func (m *Manager) spillDest(from Tier) Tier {
	if from != TierDevice {
		return noTier
	}
	hostOnly := m.pools[from] != nil && hostMemory(m.pools[from].backend)
	for t := TierOffload; t < NumTiers; t = fallback[t] {
		if m.pools[t] == nil || t == from {
			continue
		}
		if t == TierHost && !hostOnly {
			return noTier
		}
		return t
	}
	return noTier
}

// spill serves an allocation that tier from refused with err, from the
// spill tier; with m.mu held. It returns the block and its tier, or err
// when the policy does not spill or the spill tier refuses too (then
// both reasons are in the error).
func (m *Manager) spill(err error, from Tier, size int64, s Stream, role Role, op string) (*Block, Tier, error) {
	if !errors.Is(err, ErrOutOfMemory) || errors.Is(err, ErrInjected) {
		return nil, from, err
	}
	to := m.spillTier(from)
	if to == noTier {
		return nil, from, err
	}
	if m.sched != nil {
		m.sched.onSpill(m.pools[from].demand(), err)
	}
	b, err2 := m.pools[to].alloc(size, s, 0, role, op)
	if err2 != nil {
		return nil, from, fmt.Errorf("%w (spilling it to the %s tier failed too: %v)", err, to, err2)
	}
	m.spills.Count++
	m.spills.Bytes += size
	m.spillLive += size
	if m.spills.Count == 1 {
		m.spillReport = &SpillEvent{Role: role, Op: op, Size: size, From: from, To: to, Cause: shortCause(err)}
	}
	return b, to, nil
}

// unspill ends a's count as overflow (freed, or placed on purpose by a
// migration or the scheduler) and reports whether it was one; with m.mu
// held.
func (m *Manager) unspill(a *Allocation) bool {
	if !a.spilled {
		return false
	}
	m.spillLive -= a.size
	a.spilled = false
	return true
}

// shortCause is the first line of an out-of-memory error: the OOMError's
// headline without its statistics.
func shortCause(err error) error {
	var oom *OOMError
	if errors.As(err, &oom) {
		return fmt.Errorf("%s of %s would pass the %s", FormatBytes(oom.Requested), oom.Tier, limitWhat(oom))
	}
	return err
}

func limitWhat(o *OOMError) string {
	if o.Cause == nil && o.Limit > 0 {
		if o.Shared > 0 {
			return "limit of " + FormatBytes(o.Limit) + " (" + FormatBytes(o.Shared) + " of it held by managed memory)"
		}
		return "limit of " + FormatBytes(o.Limit)
	}
	if o.Cause != nil && o.Budget > 0 {
		return o.budget()
	}
	return "memory of " + o.Backend
}

// report hands a pending spill report to OnSpill or standard error; with
// m.mu not held.
func (m *Manager) report(ev *SpillEvent, fn func(SpillEvent)) {
	if fn != nil {
		fn(*ev)
		return
	}
	fmt.Fprintln(os.Stderr, "strata:", ev.String())
}
