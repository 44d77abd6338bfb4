package checkpoint

import (
	"slices"
	"sync"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// Offload moves what checkpointed regions hold between the passes (the
// outputs their policy saves, and their inputs of memory role activation) to
// host memory while the forward pass goes on, and brings each region's
// back ahead of its backward: PyTorch's save_on_cpu and DeepSpeed's
// checkpoint offload, overlapped with compute. The copies run on the
// GPU's copy engines (tensor.MoveTo), so a step pays for them only where
// the bus is slower than the arithmetic they hide behind; on the CPU the
// tiers are all host memory and the moves are plain copies, which keeps
// the bookkeeping tested. Results are bit for bit those without it.
//
// One Offload serves the regions of a model (Options.Offload); it keeps,
// per context, the regions whose forward pass ran and whose backward has
// not, in forward order. A region run by another region's function (in
// its forward pass or its recomputation) is not one of them: what it
// holds goes with the enclosing region's scope. When a region's forward
// pass ends, the region Keep places before it is moved out: the last Keep
// regions of a forward pass stay on the device, since backward needs them
// first. When backward reaches a region, what it moved out is brought
// back if still away and the Ahead regions before it start coming back,
// so that their copies run during this region's recomputation and
// backward. A region that backward never reached (a pass with recording
// on and no backward), or whose result the model dropped (Var.Drop), is
// forgotten when its context's next region ends its forward pass, and
// what it moved out that is still live (an input that outlives the pass)
// comes back to the device then.
//
// Use it with a policy that saves the expensive outputs (SaveMatMuls):
// the device then holds no region's saved outputs but the last Keep and
// the Ahead coming back, and recomputes only the cheap ops; or with whole
// regions (no policy), where only their inputs move. A move into a device
// that cannot take it leaves the tensor where it is and the ops read it
// over the bus (slower, never wrong). On a GPU whose device memory is
// expandable (STRATA_EXPANDABLE_SEGMENTS=1) the moves copy by kernel on the
// copy stream (tensor's vmmCopier), a few blocks at the greatest priority:
// bit for bit the same results. Beside a bus-bound optimizer update
// (gpt2-medium under a 4 GiB budget with AdamW's moments offloaded) the
// moves add to the bus more than they take off it: the block inputs of
// gpt2-medium bf16 are 768 MiB a pass each way, for 540 MiB of moments kept
// on the device in their place (bench/results/hybrid-2026-12-04-s23.md).
type Offload struct {
	// Tier is where the moved tensors wait; the zero value (TierHost,
	// pageable memory the GPU's kernels cannot read) means
	// memory.TierStaging: mapped pinned host memory, which the copy
	// engines reach at the bus's full speed and kernels can read.
	Tier memory.Tier
	// Keep is how many of the last regions of a forward pass keep theirs
	// on the device (default 2 when 0; negative: none).
	Keep int
	// Ahead is how many regions before the one in backward are brought
	// back ahead of use (default 1 when 0; negative: none).
	Ahead int

	mu   sync.Mutex
	live map[*tensor.Ctx]*records
	// last is the forward pass that ended last, of whichever context
	// (its backward began, or its context began another pass), and
	// recent the records of the context that registered a region last:
	// Regions reports one of their passes. The statistics are kept per
	// context, since contexts sharing an Offload interleave their passes:
	// counted together, their regions added up to a pass neither ran.
	last   passStats
	recent *records
}

// records are one context's: its regions whose forward pass ran and whose
// backward has not, in forward order, and its forward pass's statistics.
type records struct {
	rs   []*held
	pass passStats // the pass in progress, or the last one
}

// passStats counts a forward pass's regions and the most bytes one held.
type passStats struct {
	regions int
	largest int64
	ended   bool // backward reached one of its regions: the pass is over
}

// Regions reports how many regions the last forward pass had and the most
// bytes one of them held in what Offload moves (its saved outputs and
// activation inputs, each storage once), so that a caller under a device
// budget can choose Keep: each region kept costs about that much device
// memory and saves that much traffic each way. Zeros before any pass.
//
// Both numbers are one context's pass, never a sum over contexts sharing
// the Offload whose passes interleave: the pass in progress of the
// context that registered a region last, once it has as many regions as
// the last pass to end; else that one, the pass of whichever context
// whose backward began (or, never run backward, whose context began
// another pass) last. With one context it is the last forward pass.
func (o *Offload) Regions() (n int, largest int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.last
	if r := o.recent; r != nil && !r.pass.ended && r.pass.regions >= p.regions {
		p = r.pass // larger than the last already
	}
	return p.regions, p.largest
}

// SetKeep sets Keep, safely while forward passes run on other goroutines:
// the next region to end its forward pass reads it. A model that changes
// its checkpointing between steps sets it before each forward pass.
func (o *Offload) SetKeep(n int) {
	o.mu.Lock()
	o.Keep = n
	o.mu.Unlock()
}

// held is one region's moved tensors.
type held struct {
	ts  []*tensor.Tensor
	out bool // moved out (and not yet brought back)
	// result is the region's result's value, which goes with the scope
	// of the forward pass (where the saved outputs go too), also when
	// what the region moves does not: inputs of an outer scope, or
	// nothing at all (no policy, no input of role activation).
	result *tensor.Tensor
}

func (o *Offload) tier() memory.Tier {
	if o.Tier == memory.TierHost {
		return memory.TierStaging
	}
	return o.Tier
}

func orDefault(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// add registers a region's tensors after its forward pass and moves out
// the region Keep places before it. It returns the region's record.
func (o *Offload) add(c *tensor.Ctx, saved []*tensor.Tensor, inputs []*autograd.Var, result *tensor.Tensor) *held {
	h := &held{ts: saved, result: result}
	for _, x := range inputs {
		if x != nil && x.Value.Allocation().Role() == memory.RoleActivation {
			h.ts = append(h.ts, x.Value) // not parameters, nor data of other roles
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.live == nil {
		o.live = map[*tensor.Ctx]*records{}
	}
	// Other contexts' passes that never ran backward (their scopes
	// released what they held): forget them, or a context used once
	// stays in the map for ever. Not while one of their regions holds a
	// live tensor in host memory (an input that outlives the pass): only
	// its own context may move it back (its goroutine may be using it, or
	// releasing it), which it does below when it next registers a region.
	for k, r := range o.live {
		if k != c && !slices.ContainsFunc(r.rs, func(h *held) bool { return !h.released() || h.away() }) {
			r.rs = nil
			delete(o.live, k)
		}
	}
	r := o.live[c]
	if r == nil {
		r = &records{}
		o.live[c] = r
	}
	// Regions of a forward pass that never ran backward (their tensors
	// were released with their scopes), or whose result was dropped
	// (released): what they moved out and is still live comes back first,
	// for nothing else would bring it back. An input that outlives the
	// pass stayed in host memory for good, and a region whose result the
	// model dropped (Var.Drop: a residual branch, which no backward
	// reads) was recomputed from host memory in its backward.
	rs := r.rs[:0]
	for _, h := range r.rs {
		if h.released() {
			o.back(h)
		} else {
			rs = append(rs, h)
		}
	}
	if len(rs) == 0 { // a new forward pass
		if r.pass.regions > 0 && !r.pass.ended {
			o.last = r.pass // one that never ran backward ends here
		}
		r.pass = passStats{}
	}
	r.pass.regions++
	r.pass.largest = max(r.pass.largest, h.bytes())
	if r.pass.ended {
		o.last = r.pass // a region after backward began (Grad over part of the pass)
	}
	o.recent = r
	rs = append(rs, h)
	r.rs = rs
	if i := len(rs) - 1 - orDefault(o.Keep, 2); i >= 0 && !rs[i].out && !rs[i].released() {
		rs[i].out = true
		o.move(o.tier(), rs[i].ts...)
	}
	return h
}

// enter is the start of region h's backward: h's tensors come back if
// they are away, and the Ahead regions before it start to.
func (o *Offload) enter(c *tensor.Ctx, h *held) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.live[c]
	if r == nil {
		return
	}
	if !r.pass.ended {
		r.pass.ended = true
		o.last = r.pass
	}
	rs := r.rs
	i := len(rs) - 1
	for i >= 0 && rs[i] != h {
		i--
	}
	if i < 0 {
		return
	}
	// h's backward is running, so its pass is not over even when its
	// result was released (dropped by the model): it and those before it
	// come back whatever their results, each tensor still live.
	for j := i; j >= 0 && j >= i-orDefault(o.Ahead, 1); j-- {
		o.back(rs[j])
	}
}

// back brings h's tensors back to the device if h moved them out; those
// released since stay where they were freed (tensor.MoveTo refuses them).
func (o *Offload) back(h *held) {
	if !h.out {
		return
	}
	h.out = false
	var ts []*tensor.Tensor
	for _, t := range h.ts {
		if !t.Released() {
			ts = append(ts, t)
		}
	}
	if len(ts) > 0 {
		o.move(memory.TierDevice, ts...)
	}
}

// leave forgets region h once its backward is over.
func (o *Offload) leave(c *tensor.Ctx, h *held) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.live[c]
	if r == nil {
		return
	}
	if i := slices.Index(r.rs, h); i >= 0 {
		r.rs = slices.Delete(r.rs, i, i+1)
	}
	if len(r.rs) == 0 {
		delete(o.live, c) // its pass's statistics are in last (enter)
	}
}

// move moves ts to tier; a tier that cannot take them leaves them where
// they are (tensor.MoveTo's out-of-memory errors), where the ops still
// read them.
func (o *Offload) move(t memory.Tier, ts ...*tensor.Tensor) {
	_ = tensor.MoveTo(t, ts...)
}

// away reports whether h holds a live tensor moved out.
func (h *held) away() bool {
	return h.out && slices.ContainsFunc(h.ts, func(t *tensor.Tensor) bool { return !t.Released() })
}

// bytes is the size of h's storages, each once.
func (h *held) bytes() int64 {
	var n int64
	seen := map[*memory.Allocation]bool{}
	for _, t := range h.ts {
		if a := t.Allocation(); !seen[a] {
			seen[a] = true
			n += a.Size()
		}
	}
	return n
}

// released reports whether the region's forward pass is over without
// backward: its result's value, or any of its tensors, was released.
// Without the result a region over inputs of an outer scope, or with
// nothing to move, never looked released, and passes that never ran
// backward stayed in the records for ever (with their contexts), moving
// the live input out for the passes after.
//
// A result the model dropped (Var.Drop) reads the same: the package
// cannot tell a Drop from the closing of the scope (a token owned by the
// scope would cost each region an allocation, which the memory
// statistics would count). Such a region is forgotten as the next one
// registers, its tensors brought back first (add), or they come back as
// its backward begins (enter): it is never recomputed from host memory.
// But it no longer counts among the last Keep regions, is moved out only
// if Keep did so before the drop, and when every region before the next
// one is forgotten so, Regions counts a new pass from there.
func (h *held) released() bool {
	if h.result.Released() {
		return true
	}
	for _, t := range h.ts {
		if t.Released() {
			return true
		}
	}
	return false
}
