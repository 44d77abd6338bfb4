package memory

import "fmt"

// PoolConfig tunes a Pool.
type PoolConfig struct {
	// Limit is the most bytes the pool may reserve from its backend; 0 means
	// no limit. A request that would pass it fails with an *OOMError
	// without calling the backend (after releasing the cache, if that
	// helps). It is the per-process memory fraction of PyTorch, in bytes.
	Limit int64
	// MaxSplitSize is the largest block the pool splits; 0 means no limit.
	// Blocks above it are never split, and requests below it never take
	// them, which stops large cached blocks from being carved into
	// fragments. When set it must exceed LargeBuffer (20 MiB), since the
	// segments for medium requests are that large.
	MaxSplitSize int64
	// StreamSync tells when work on a stream has finished, for blocks used
	// on streams other than their own (Pool.RecordStream); nil where there
	// are no such streams, as on the host.
	StreamSync StreamSync
	// Expandable makes the pool grow one expandable segment per stream and
	// pool kind by mapping pages instead of reserving new segments
	// (pool_expand.go). The backend must be a VirtualMemory.
	Expandable bool
	// PlanSteps makes an expandable pool learn the allocations of a
	// training step and place those of the next steps by a layout that
	// knows when each block dies (pool_expand_plan.go): every trace of
	// bench/traces within 1.02 of its requested peak, and live training
	// settling closer to its allocated peak at the same speed, for more
	// time a call in the first steps (layouts of a few milliseconds, more
	// for long periods, their work bounded) and tens to hundreds of
	// nanoseconds a call to record the allocations. A CUDA manager sets it
	// for its device tier by default (Config.PlanSteps; STRATA_PLAN_STEPS=0
	// turns it off; 1 turns it on in a host manager's). Ignored without Expandable, and with a MaxSplitSize.
	PlanSteps bool
}

// Validate reports a configuration NewPool would refuse.
func (c PoolConfig) Validate() error {
	if c.Limit < 0 {
		return fmt.Errorf("memory: pool limit %d is negative: %w", c.Limit, ErrInvalidArgument)
	}
	if c.MaxSplitSize < 0 || (c.MaxSplitSize > 0 && c.MaxSplitSize <= LargeBuffer) {
		return fmt.Errorf("memory: max split size %d (%s) must be 0 or more than %s: %w",
			c.MaxSplitSize, FormatBytes(c.MaxSplitSize), FormatBytes(LargeBuffer), ErrInvalidArgument)
	}
	return nil
}
