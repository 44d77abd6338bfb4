package nn

import (
	"fmt"
	"strings"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
)

// CheckpointMode is how a GPT checkpoints its blocks (package checkpoint).
type CheckpointMode int

const (
	// CheckpointNone keeps every block's activations for backward, the
	// MLP's GELU output included (autograd.GeluLinearKept).
	CheckpointNone CheckpointMode = iota
	// CheckpointBlocks keeps only the inputs of the checkpointed blocks
	// and recomputes the rest of them in backward.
	CheckpointBlocks
	// CheckpointSelective checkpoints blocks under a policy that keeps
	// some op outputs and recomputes the others: unless set, the matrix
	// products with outputs up to three times the block's input
	// (checkpoint.SaveMatMulsUpTo: c_attn, the attention, both
	// projections; c_fc's 4x-wide output is recomputed).
	CheckpointSelective
)

var checkpointModes = [...]string{"none", "blocks", "selective"}

func (m CheckpointMode) String() string {
	if m < 0 || int(m) >= len(checkpointModes) {
		return fmt.Sprintf("CheckpointMode(%d)", int(m))
	}
	return checkpointModes[m]
}

// ParseCheckpointMode reads "none", "blocks" or "selective", in any case.
func ParseCheckpointMode(s string) (CheckpointMode, error) {
	for i, name := range checkpointModes {
		if strings.EqualFold(s, name) {
			return CheckpointMode(i), nil
		}
	}
	return 0, fmt.Errorf("nn: checkpoint mode %q: want none, blocks or selective", s)
}

// Checkpointing says which blocks of a GPT are checkpointed, and how. The
// zero value checkpoints nothing.
type Checkpointing struct {
	Mode CheckpointMode
	// Every checkpoints the Every-th, 2·Every-th, ... block (1-based):
	// 1 (or 0) every block, 2 every second one.
	Every int
	// Policy is the selective mode's; nil means
	// checkpoint.SaveMatMulsUpToElements(3 x the elements of the blocks'
	// input): all but the MLP's wide c_fc output, in float32 and under
	// autocast alike (counted in bytes, as before session 40, c_fc's half
	// output was kept under autocast and KeepWide did nothing); with
	// Offload checkpoint.SaveMatMuls.
	Policy checkpoint.Policy
	// Offload moves what the checkpointed blocks hold between the passes
	// (the selective mode's saved outputs, and the blocks' inputs) to
	// mapped pinned host memory on the GPU's copy engines, and brings each
	// block's back ahead of its backward (checkpoint.Offload): the device
	// holds about two blocks' worth, the bus carries the rest while the
	// GPU computes. With it the selective mode keeps every matrix
	// product's output (nothing but the norms and element-wise ops is
	// recomputed), since they wait in host memory.
	Offload bool
	// OffloadKeep is how many of the last checkpointed regions of a
	// forward pass keep what they hold on the device with Offload
	// (checkpoint.Offload.Keep): 0 means the default, 2; negative, none.
	// More kept means less on the bus and more on the device; whether
	// that is faster depends on the pool at its budget (on the H200, gpt2
	// in float32 ran alike at 2 to 6 of 12 blocks), so Placement chooses
	// it by measurement when asked (PlacementConfig.OffloadRegions).
	OffloadKeep int
	// KeepWide is, in the selective mode on the device (no Offload, no
	// Policy), how many of the last checkpointed blocks also keep their
	// MLP's wide product (c_fc's output, four times the block's input:
	// checkpoint.SaveMatMuls there, SaveMatMulsUpTo in the others), so
	// that their backward recomputes only norms and element-wise ops.
	// Each costs that product's memory and saves its recomputation (gpt2
	// in float32 on the H200: 96 MiB and 0.78 ms a block); 0 keeps none,
	// negative every one. Placement chooses it under a budget when asked
	// (PlacementConfig.WideRegions). Results are the same at every value.
	KeepWide int
}

// CheckpointLevels are checkpointing settings in the order of the
// memory they save and the recomputation they cost: none, selective on
// every block, every second block whole, every block whole. A placement
// that finds a step too large for its device budget goes up them (the
// results are the same at every level, bit for bit).
//
// The offloaded settings (Offload) are not among them: on the H200
// (session 16) they won without a budget (float32 gpt2, selective and
// offloaded: 0.98x the speed of no checkpointing at 0.36x its device pool)
// but not under one: at half the device's peak the pool reuses blocks
// whose copies still run and the device waits for them (0.92x against
// 0.93x for selective on the device), and with them in the ladder
// gpt2-medium's search under 4 GiB fell to 35k tokens/s, every first step
// at a level spilling gigabytes. Ask for them explicitly.
var CheckpointLevels = []Checkpointing{{}, {Mode: CheckpointSelective}, {Mode: CheckpointBlocks, Every: 2}, {Mode: CheckpointBlocks, Every: 1}}

// sameLevel reports whether a and b are the same level (Every 0 and 1
// are the same: every block).
func (c Checkpointing) sameLevel(l Checkpointing) bool {
	return l.Mode == c.Mode && max(l.Every, 1) == max(c.Every, 1) && l.Offload == c.Offload &&
		(!c.Offload || l.offloadKeep() == c.offloadKeep())
}

// offloadKeep is OffloadKeep with its default (2) and negatives (0) read.
func (c Checkpointing) offloadKeep() int {
	switch {
	case c.OffloadKeep == 0:
		return 2
	case c.OffloadKeep < 0:
		return 0
	}
	return c.OffloadKeep
}

// keepWide is KeepWide for n checkpointed blocks: negative is all n.
func (c Checkpointing) keepWide(n int) int {
	if c.KeepWide < 0 {
		return n
	}
	return min(c.KeepWide, n)
}

// wideKnob reports whether KeepWide applies: the selective mode, on the
// device, with the default policy.
func (c Checkpointing) wideKnob() bool {
	return c.Mode == CheckpointSelective && !c.Offload && c.Policy == nil
}

// Raised returns the level of CheckpointLevels after c's and true, or c
// and false when c is the last level or none of them (Every 0 and 1 are
// the same: every block). A placement that finds a step too large raises
// the model's checkpointing with it.
func (c Checkpointing) Raised() (Checkpointing, bool) {
	last := len(CheckpointLevels) - 1
	for i, l := range CheckpointLevels[:last] {
		if l.sameLevel(c) {
			return CheckpointLevels[i+1], true
		}
	}
	return c, false
}

// String is "none", or the mode and, past 1, how often, and whether it
// offloads: "blocks every 2", "selective, offloaded", "blocks, offloaded
// (keep 4)".
func (c Checkpointing) String() string {
	if c.Mode == CheckpointNone {
		return "none"
	}
	s := c.Mode.String()
	if c.Every > 1 {
		s = fmt.Sprintf("%v every %d", c.Mode, c.Every)
	}
	if c.Offload {
		s += ", offloaded"
		if k := c.offloadKeep(); k != 2 {
			s += fmt.Sprintf(" (keep %d)", k)
		}
	}
	switch {
	case !c.wideKnob() || c.KeepWide == 0:
	case c.KeepWide < 0:
		s += " (every wide product kept)"
	default:
		s += fmt.Sprintf(" (wide products kept in the last %d)", c.KeepWide)
	}
	return s
}

// Validate reports a mode or Every out of range.
func (c Checkpointing) Validate() error {
	switch {
	case c.Mode < CheckpointNone || c.Mode > CheckpointSelective:
		return fmt.Errorf("nn: checkpoint mode %v unknown", c.Mode)
	case c.Every < 0:
		return fmt.Errorf("nn: checkpointing every %d blocks: must not be negative", c.Every)
	}
	return nil
}

// blocks applies the blocks to x, checkpointed as g.Checkpoint says.
func (g *GPT) blocks(x *autograd.Var) *autograd.Var {
	ck := g.Checkpoint
	if ck.Mode == CheckpointNone { // every activation kept, the GELU output too
		for _, b := range g.Blocks {
			x = b.forward(x, true)
		}
		return x
	}
	// A block's input, the unit of the products' sizes, counted in
	// elements: under autocast some products write the half type (c_fc's
	// 4x output, and the fused attention's c_attn), others float32, so a
	// bound in bytes would keep c_fc's half output (2 U of float32 bytes).
	elems := int64(x.Value.Numel())
	wideBytes := 4 * elems * int64(x.Value.DType().Size()) // c_fc's output
	if st := amp.Current(x.Value.Ctx()); st.Enabled {
		wideBytes = 4 * elems * int64(st.DType.Size())
	}
	var o checkpoint.Options
	if ck.Mode == CheckpointSelective {
		o.Policy = ck.Policy
		switch {
		case o.Policy != nil:
		case ck.Offload:
			o.Policy = checkpoint.SaveMatMuls
		default:
			o.Policy = checkpoint.SaveMatMulsUpToElements(3 * elems)
		}
	}
	if ck.Offload {
		o.Offload = g.offloader()
		o.Offload.SetKeep(ck.OffloadKeep) // the same convention: 0 is 2, negative none
	}
	layers := make([]checkpoint.Layer, len(g.Blocks))
	for i, b := range g.Blocks {
		layers[i] = b.Forward
	}
	every := max(ck.Every, 1)
	if !ck.wideKnob() {
		return o.Sequential(every, x, layers...)
	}
	// The last KeepWide checkpointed blocks keep every product: the split
	// is at a multiple of every, so each part checkpoints the blocks the
	// whole would (the every-th, 2·every-th, ... counted from the first).
	n := len(layers) / every
	wide := wideStats{regions: n, per: wideBytes}
	if w := g.wide.Load(); w == nil || *w != wide {
		g.wide.Store(&wide)
	}
	split := (n - ck.keepWide(n)) * every
	x = o.Sequential(every, x, layers[:split]...)
	o.Policy = checkpoint.SaveMatMuls
	return o.Sequential(every, x, layers[split:]...)
}

// wideStats is what the last selective forward pass on the device had
// for KeepWide: its checkpointed blocks and the bytes of one wide product.
type wideStats struct {
	regions int
	per     int64
}

// WideRegions reports, for the selective mode on the device, how many
// checkpointed blocks the last forward pass had and the bytes one block's
// wide product (the MLP's c_fc output) takes if kept (Checkpointing.KeepWide);
// zeros before such a pass. Placement uses it to choose KeepWide under a
// budget.
func (g *GPT) WideRegions() (n int, per int64) {
	if w := g.wide.Load(); w != nil {
		return w.regions, w.per
	}
	return 0, 0
}

// offloader is the GPT's checkpoint.Offload, made on first use: one for
// all its blocks, which it keeps track of per context.
func (g *GPT) offloader() *checkpoint.Offload {
	if o := g.offload.Load(); o != nil {
		return o
	}
	g.offload.CompareAndSwap(nil, &checkpoint.Offload{})
	return g.offload.Load()
}

// OffloadRegions reports, for Checkpointing.Offload, how many checkpointed
// regions the last forward pass had and the most bytes one of them held
// (checkpoint.Offload.Regions); zeros before the first offloaded pass.
// Placement uses it to choose OffloadKeep under a budget.
func (g *GPT) OffloadRegions() (n int, largest int64) {
	if o := g.offload.Load(); o != nil {
		return o.Regions()
	}
	return 0, 0
}
