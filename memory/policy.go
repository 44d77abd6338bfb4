package memory

import (
	"fmt"
	"strings"
)

// Advice is a set of hints for managed (unified) memory, applied by the CUDA
// managed backend with cuMemAdvise and cuMemPrefetchAsync when an
// allocation lands in TierManaged; other tiers ignore it.
type Advice uint8

const (
	// AdviseReadMostly: the data is mostly read; the driver may keep
	// read-only copies on every processor that reads it.
	AdviseReadMostly Advice = 1 << iota
	// AdvisePreferDevice: keep the pages on the GPU where possible.
	AdvisePreferDevice
	// AdvisePreferHost: keep the pages in host memory (cold data).
	AdvisePreferHost
	// AdviseAccessedByDevice: map the pages into the GPU's page tables so it
	// reads them without faulting, wherever they are.
	AdviseAccessedByDevice
	// AdviseAccessedByHost: likewise for the CPU.
	AdviseAccessedByHost
	// AdvisePrefetchToDevice: migrate the pages to the GPU once filled,
	// before the first kernel reads them.
	AdvisePrefetchToDevice

	adviceAll = AdvisePrefetchToDevice<<1 - 1
)

var adviceNames = [...]string{"read-mostly", "prefer-device", "prefer-host", "accessed-by-device", "accessed-by-host", "prefetch-to-device"}

// String lists the flags joined by "|", or "none".
func (a Advice) String() string {
	if a == 0 {
		return "none"
	}
	var parts []string
	for i, n := range adviceNames {
		if a&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if rest := a &^ adviceAll; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint8(rest)))
	}
	return strings.Join(parts, "|")
}

// Validate reports unknown flags and contradictions (preferring both the
// device and the host).
func (a Advice) Validate() error {
	if a&^adviceAll != 0 {
		return fmt.Errorf("memory: advice %s has unknown flags: %w", a, ErrInvalidArgument)
	}
	if a&AdvisePreferDevice != 0 && a&AdvisePreferHost != 0 {
		return fmt.Errorf("memory: advice %s prefers both device and host: %w", a, ErrInvalidArgument)
	}
	return nil
}

// Placement is where a role's allocations go: a tier and, for managed
// memory, the advice to apply.
type Placement struct {
	Tier   Tier
	Advice Advice
}

// String is the tier, followed by the advice in parentheses when there is
// any: "device", "managed(read-mostly|prefer-device)".
func (p Placement) String() string {
	if p.Advice == 0 {
		return p.Tier.String()
	}
	return p.Tier.String() + "(" + p.Advice.String() + ")"
}

// Policy maps every role to a placement. The zero Policy stands for
// HybridPolicy, both in Config and in Manager.SetPolicy; build policies
// with HybridPolicy or SingleTierPolicy and change single roles from there.
type Policy struct {
	Placements [NumRoles]Placement
	// Spill lets an allocation that the device tier cannot serve (its
	// budget, Config.Limits[TierDevice], or the device itself is full,
	// even after the cache is released) land in TierOffload instead of
	// failing: host-resident memory the GPU reads over the bus, slower but
	// not fatal (spill.go). HybridPolicy spills; SingleTierPolicy does
	// not, so the baselines fail as a plain allocator does.
	Spill bool
	// explicit marks policies built by the constructors, so that
	// SingleTierPolicy(TierHost), whose placements are all zero, is not
	// taken for the zero Policy.
	explicit bool
}

// HybridPolicy is the placement of the hybrid memory manager: pooled device
// memory for everything touched every step (parameters, gradients,
// optimizer state, activations, workspaces, the rest); managed memory
// preferring the device, accessed by it and prefetched to it for embedding
// tables; the same plus read-mostly for frozen weights; mapped pinned
// staging memory for transfer buffers.
//
// Embedding tables are not advised read-mostly: a GPT's token table is
// trained every step (and is the tied output head), and every write to a
// read-mostly page collapses its copies. Measured on an H200 with GPT-2's
// 50257x768 table: AdamW on it took about 0.4 s a step read-mostly.
func HybridPolicy() Policy {
	p := SingleTierPolicy(TierDevice)
	embedding := AdvisePreferDevice | AdviseAccessedByDevice | AdvisePrefetchToDevice
	p.Placements[RoleEmbedding] = Placement{Tier: TierManaged, Advice: embedding}
	p.Placements[RoleFrozenWeight] = Placement{Tier: TierManaged, Advice: embedding | AdviseReadMostly}
	p.Placements[RoleStaging] = Placement{Tier: TierStaging}
	p.Spill = true
	return p
}

// SingleTierPolicy places every role in tier t with no advice: the
// baselines "everything in device memory", "everything managed",
// "everything zero-copy".
func SingleTierPolicy(t Tier) Policy {
	p := Policy{explicit: true}
	for r := range p.Placements {
		p.Placements[r] = Placement{Tier: t}
	}
	return p
}

// isZero reports whether p is the zero Policy.
func (p Policy) isZero() bool { return p == Policy{} }

// Place returns the placement of role r; unknown roles are placed like
// RoleOther.
func (p Policy) Place(r Role) Placement {
	if r >= NumRoles {
		r = RoleOther
	}
	return p.Placements[r]
}

// Validate reports placements on unknown tiers and invalid advice.
func (p Policy) Validate() error {
	for r, pl := range p.Placements {
		if pl.Tier >= NumTiers {
			return fmt.Errorf("memory: policy places role %s on unknown %s: %w", Role(r), pl.Tier, ErrInvalidArgument)
		}
		if err := pl.Advice.Validate(); err != nil {
			return fmt.Errorf("memory: policy for role %s: %w", Role(r), err)
		}
	}
	return nil
}

// String lists "role=placement" for every role, space separated, and
// "spill" when the policy spills.
func (p Policy) String() string {
	var b strings.Builder
	for r, pl := range p.Placements {
		if r > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Role(r).String())
		b.WriteByte('=')
		b.WriteString(pl.String())
	}
	if p.Spill {
		b.WriteString(" spill")
	}
	return b.String()
}
