package tensor

import (
	"errors"
	"fmt"

	"github.com/strata-ml/strata/memory"
)

// MoveTo moves the bytes of each tensor's storage to tier of its device's
// memory manager (after the manager's fallback), keeping every tensor,
// view and alias as it is: ops read the address at each launch, so they
// see the new place. It is how activations wait in host memory between
// the forward and the backward pass (checkpoint.Offload) and come back
// before they are needed.
//
// On a GPU the copies run on the device's copy stream, after the work
// queued so far on the device's stream, while that stream goes on
// computing; the first op that uses a moved tensor waits for its copy on
// the device (not the host), and the old bytes return to their pool once
// the copy has read them. Moving to the staging tier (mapped pinned host
// memory) copies at the bus's full speed both ways; an op that reads a
// tensor while it is there reads it over the bus. On the CPU the move is
// the manager's Migrate, done at once.
//
// Tensors already in tier, and storages named twice, are left alone.
// Out of memory in tier leaves that tensor where it is and the others are
// still moved: the error then wraps each *memory.OOMError, so a caller
// prefetching into a full device can go on (the op reads it where it is).
// A released tensor, or one a CUDA graph capture is using, is an
// *OpError panic, as for any op.
func MoveTo(tier memory.Tier, ts ...*Tensor) error {
	const op = "MoveTo"
	if tier >= memory.NumTiers {
		fail(op, ErrArgument, "unknown memory %s", tier)
	}
	type group struct {
		dev Device
		sts []*storage
	}
	var groups []*group
	seen := map[*storage]bool{}
	for i, t := range ts {
		if t == nil {
			fail(op, ErrArgument, "tensor %d is nil", i)
		}
		if t.ref.released.Load() {
			fail(op, ErrReleased, "tensor %d is released", i)
		}
		st := t.ref.st
		if seen[st] || st.alloc.Tier() == tier {
			continue
		}
		seen[st] = true
		var g *group
		for _, x := range groups {
			if x.dev == t.dev {
				g = x
			}
		}
		if g == nil {
			g = &group{dev: t.dev}
			groups = append(groups, g)
		}
		g.sts = append(g.sts, st)
	}
	var errs []error
	for _, g := range groups {
		if cb, ok := g.dev.backend().(cudaBackend); ok {
			errs = append(errs, cb.d.moveTo(op, tier, g.sts))
			continue
		}
		for _, st := range g.sts {
			if err := g.dev.Memory().Migrate(st.alloc, tier); err != nil {
				errs = append(errs, fmt.Errorf("tensor: moving %s to %s: %w", memory.FormatBytes(st.nbytes), tier, err))
			}
		}
	}
	return errors.Join(errs...)
}
