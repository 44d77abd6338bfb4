package tensor

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// The copy ring of the pipelined update (off with STRATA_PIPELINE_RING=0).
// With AdamW's moments in host memory the pipelined update's kernel would
// read and write them over the bus itself, in the GPU's 128-byte requests:
// on the H200 that carried 39 GB/s each way beside the forward pass
// (STRATA_PIPELINE_TRACE, session 23), where the copy engines move 90.8
// GB/s both ways together between pinned memory and the device
// (examples/bench-link). With the ring, the copy engines bring each chunk
// of a parameter's moments into a slot of device memory on one stream, the
// kernel updates them there on the side stream, and the copy engines write
// them back on another: 49 GB/s each way, and gpt2-medium under a 4 GiB
// budget went from 0.49x to 0.535x of its unconstrained speed, with the same
// bits (bench/results/hybrid-2026-12-04-s23.md). The moments must be in
// page-locked memory (the staging tier, or the offload tier over pinned
// memory, memory.Manager.HostPinned): from managed memory the copy engines
// ran at half the kernel's speed, so such moments stay off the ring.
//
// The slots are device memory of their own (cuMemAlloc), not the pool's:
// the copy engines do not always take ranges mapped with the virtual
// memory API (expandable segments, memory's package doc). They are held
// against the device budget (memory.Manager.Hold), so a budget still
// covers all the device memory the process uses; when the budget has no
// room for them there is no ring and the kernel reads over the bus as
// before.
//
// Ordering, per chunk k in slot s = k mod ringSlots: the in-stream waits
// for slot s's last write-back (evFree) and, before a parameter's first
// chunk, for its moments' fences (their previous write-back, the step's
// start on the device's stream); copies the chunk in, records evIn; the
// side stream waits for it, runs the chunk's rows and records evKernel; the
// out-stream waits for that, copies the chunk back and records evFree.
// After a group, its moments are fenced on the out-stream's event (their
// bytes in host memory are final only then), its parameters on the side
// stream's, as without the ring. Synchronize and the placement's
// migrations wait for the out-stream too.

// EnvPipelineRing turns the copy ring of the pipelined update off ("0");
// it is on otherwise.
const EnvPipelineRing = "STRATA_PIPELINE_RING"

var pipelineRing = os.Getenv(EnvPipelineRing) != "0"

const (
	// ringSlots is the ring's depth: a chunk coming in, one updated, one
	// going out, and one to spare.
	ringSlots = 4
	// ringChunk is the elements of each moment a slot holds: 32 table
	// rows, 8 MiB of float32 each for the first and second moment.
	ringChunk = 32 * adamwChunk
	// ringSlotBytes is a slot's bytes: a chunk of each moment.
	ringSlotBytes = 2 * 4 * ringChunk
)

// cudaRing is a device's copy ring, made on first use.
type cudaRing struct {
	once  sync.Once
	ready atomic.Bool
	err   atomic.Pointer[error] // why it could not be made
	base  cuda.DevicePtr
	// release gives the slots' hold back; the ring lives as long as its
	// device, as the side and copy streams do.
	release func()
	in, out streamQueue
	// evIn, evKernel and evFree are each slot's copy in, update and copy
	// out; groupOut one event a group, recorded on the out-stream after
	// its last chunk; tail serves the migration barrier.
	evIn, evKernel, evFree [ringSlots]*cuda.Event
	groupOut               []*cuda.Event
	tail                   *cuda.Event
	next                   int // the slot of the next chunk
}

// ringFor returns d's copy ring when the pipelined update should use it:
// STRATA_PIPELINE_RING is not 0 and the ring could be made (device memory
// and room under the budget) at its first use (PreparePipelineRing, or the
// first pipelined update); nil otherwise.
func (d *cudaDevice) ringFor(op string) *cudaRing {
	if !pipelineRing {
		return nil
	}
	d.refuseInCapture(op, "making the pipelined update's copy ring")
	r := &d.ring
	r.once.Do(func() {
		if err := d.makeRing(); err != nil {
			r.err.Store(&err)
		}
	})
	if !r.ready.Load() {
		return nil
	}
	return r
}

// makeRing allocates the ring's slots, streams and events; on an error
// it gives the slots and their hold back (streams and events made so far
// stay, as the device's others do).
func (d *cudaDevice) makeRing() (err error) {
	r := &d.ring
	release, err := d.mem.Hold(memory.TierDevice, ringSlots*ringSlotBytes)
	if err != nil {
		return err
	}
	if r.base, err = d.ctx.MemAlloc(ringSlots * ringSlotBytes); err != nil {
		release()
		return err
	}
	defer func() {
		if err != nil {
			_ = d.ctx.MemFree(r.base)
			release()
		}
	}()
	r.release = release
	for _, q := range []*streamQueue{&r.in, &r.out} {
		st, err := d.ctx.NewStreamPriority(cuda.PriorityHighest)
		if err != nil {
			return err
		}
		*q = streamQueue{ctx: d.ctx, stream: st}
	}
	for s := range ringSlots {
		for _, e := range []**cuda.Event{&r.evIn[s], &r.evKernel[s], &r.evFree[s]} {
			if *e, err = d.ctx.NewEvent(cuda.EventDisableTiming); err != nil {
				return err
			}
		}
		if err := r.evFree[s].Record(r.out.stream); err != nil {
			return err
		}
	}
	if r.tail, err = d.ctx.NewEvent(cuda.EventDisableTiming); err != nil {
		return err
	}
	r.ready.Store(true)
	return nil
}

// slot returns the address of slot s's first moment; its second moment
// follows ringChunk float32s later.
func (r *cudaRing) slot(s int) cuda.DevicePtr {
	return r.base + cuda.DevicePtr(s*ringSlotBytes)
}

// ringable reports whether parameter p's update can go through the ring:
// float32 moments m and v in page-locked host memory (the staging tier, or
// the offload tier over pinned memory).
func (d *cudaDevice) ringable(p, m, v *Tensor) bool {
	if p.dtype != Float32 || p.Numel() == 0 {
		return false
	}
	for _, t := range [...]*Tensor{m, v} {
		if tier := t.ref.st.alloc.Tier(); tier == memory.TierDevice || !d.mem.HostPinned(tier) {
			return false
		}
	}
	return true
}

// ringChunkRef is a chunk of a parameter's moments in host memory, in
// slot s of the ring during its update.
type ringChunkRef struct {
	slot  int
	m, v  cuda.DevicePtr // the chunk's first element in host memory
	n     int            // elements
	first bool           // the parameter's first chunk: wait for its moments' fences
	ms    *storage       // the moments' storages (for their fences)
	vs    *storage
}

// ringRows lays out adamw_multi's rows for parameter p's chunk of n
// elements from element lo, its moments in slot s: as adamwRowsWith's, with
// the moments' addresses in the slot.
func (r *cudaRing) ringRows(rows []byte, pb, gb cuda.DevicePtr, gsize, lo, n, s int, decay float64, gdt int32) []byte {
	mb, vb := r.slot(s), r.slot(s)+cuda.DevicePtr(4*ringChunk)
	for off := 0; off < n; off += adamwChunk {
		rows = appendAdamWRow(rows, [4]uint64{
			uint64(pb) + uint64(4*(lo+off)), uint64(gb) + uint64(gsize*(lo+off)),
			uint64(mb) + uint64(4*off), uint64(vb) + uint64(4*off),
		}, min(adamwChunk, n-off), decay, gdt)
	}
	return rows
}

// chunkIn queues chunk c's copy into its slot on the in-stream, after the
// slot's last write-back (and, for a parameter's first chunk, its moments'
// fences and the step's start on the device's stream), and makes side
// stream s wait for it.
func (d *cudaDevice) chunkIn(op string, r *cudaRing, s *cudaSide, c ringChunkRef) {
	check := func(what string, err error) { d.check(op, what, err) }
	check("ordering the ring's copy in after its slot's write-back", r.in.stream.WaitEvent(r.evFree[c.slot]))
	if c.first {
		check("ordering the ring's copy in after the step's start", r.in.stream.WaitEvent(s.start))
		for _, st := range [...]*storage{c.ms, c.vs} {
			if f := st.fence.Load(); f != nil {
				check("ordering the ring's copy in after a moment's fence", r.in.stream.WaitEvent(f.ev))
			}
		}
	}
	mb := r.slot(c.slot)
	check("copying a chunk of first moments into the ring", r.in.copyDtoD(mb, c.m, 4*c.n))
	check("copying a chunk of second moments into the ring", r.in.copyDtoD(mb+cuda.DevicePtr(4*ringChunk), c.v, 4*c.n))
	check("recording a ring copy's event", r.evIn[c.slot].Record(r.in.stream))
	check("ordering the side stream after a ring copy", s.stream.WaitEvent(r.evIn[c.slot]))
}

// chunkOut queues chunk c's write-back on the out-stream after its update
// on side stream s, and frees its slot.
func (d *cudaDevice) chunkOut(op string, r *cudaRing, s *cudaSide, c ringChunkRef) {
	check := func(what string, err error) { d.check(op, what, err) }
	check("recording a ring update's event", r.evKernel[c.slot].Record(s.stream))
	check("ordering the ring's write-back after its update", r.out.stream.WaitEvent(r.evKernel[c.slot]))
	mb := r.slot(c.slot)
	check("writing a chunk of first moments back from the ring", r.out.copyDtoD(c.m, mb, 4*c.n))
	check("writing a chunk of second moments back from the ring", r.out.copyDtoD(c.v, mb+cuda.DevicePtr(4*ringChunk), 4*c.n))
	check("recording a ring slot's event", r.evFree[c.slot].Record(r.out.stream))
}

// fenceRinged fences the moments of group g that went through the ring
// on the out-stream's event after the group's last write-back.
func (d *cudaDevice) fenceRinged(op string, r *cudaRing, g int, sts []*storage) {
	for len(r.groupOut) <= g {
		e, err := d.ctx.NewEvent(cuda.EventDisableTiming)
		d.check(op, "creating a ring event", err)
		r.groupOut = append(r.groupOut, e)
	}
	ev := r.groupOut[g]
	d.check(op, "recording a ring group's event", ev.Record(r.out.stream))
	f := &sideFence{d: d, ev: ev, on: r.out.stream}
	for _, st := range sts {
		st.fence.Store(f)
	}
}

// syncRing waits for the ring's streams, when there is a ring.
func (d *cudaDevice) syncRing() error {
	r := &d.ring
	if !r.ready.Load() {
		return nil
	}
	if err := r.in.sync(); err != nil {
		return err
	}
	return r.out.sync()
}

// ringBarrier makes the device's stream wait for the ring's write-backs
// queued so far (the placement's migrations of moments).
func (d *cudaDevice) ringBarrier() error {
	r := &d.ring
	if !r.ready.Load() {
		return nil
	}
	if err := r.tail.Record(r.out.stream); err != nil {
		return err
	}
	return d.stream.WaitEvent(r.tail)
}

// pipeUnit is a launch of a pipelined update: n rows of its track's table
// from row, and the chunk of moments the ring brings in for them (nil: the
// rows address the moments where they are).
type pipeUnit struct {
	row, n int
	chunk  *ringChunkRef
}

// pipeUnits appends the rows of a run's parameters on d to rows and
// returns their launches and the dtype's float index (-1 when every
// parameter is empty): a launch a ring chunk for each parameter whose
// moments can go through d's copy ring (made at the first such parameter,
// unless PreparePipelineRing made it before), and one for each run of the
// others between them; without a ring, one launch of adamwRows' rows.
// Slots are taken in launch order.
func pipeUnits(d *cudaDevice, rows *[]byte, ps, gs, ms, vs []*Tensor, wd []float64, lr float64) ([]pipeUnit, int) {
	var units []pipeUnit
	f := -1
	direct := func(lo, hi int) {
		if lo >= hi {
			return
		}
		rs, fi := adamwRows(ps[lo:hi], gs[lo:hi], ms[lo:hi], vs[lo:hi], wd[lo:hi], lr, rawPtr)
		if fi >= 0 {
			f = fi
		}
		units = append(units, pipeUnit{row: len(*rows) / adamwRowBytes, n: len(rs) / adamwRowBytes})
		*rows = append(*rows, rs...)
	}
	pending := 0
	for i, p := range ps {
		if !pipelineRing || !d.ringable(p, ms[i], vs[i]) {
			continue
		}
		r := d.ringFor("AdamW")
		if r == nil {
			break // no ring: every parameter's rows address its moments
		}
		direct(pending, i)
		pending = i + 1
		f = kF32
		// Each address once a parameter (rawPtr counts an access).
		pb, gb, mb, vb := rawPtr(p), rawPtr(gs[i]), rawPtr(ms[i]), rawPtr(vs[i])
		decay := 1 - float64(lr*wd[i])
		gdt, gsize := adamwGradType(p, gs[i]), gs[i].dtype.Size()
		n := p.Numel()
		for lo := 0; lo < n; lo += ringChunk {
			cn := min(ringChunk, n-lo)
			slot := r.next % ringSlots
			r.next++
			row := len(*rows) / adamwRowBytes
			*rows = r.ringRows(*rows, pb, gb, gsize, lo, cn, slot, decay, gdt)
			units = append(units, pipeUnit{row: row, n: len(*rows)/adamwRowBytes - row, chunk: &ringChunkRef{
				slot: slot, m: mb + cuda.DevicePtr(4*lo), v: vb + cuda.DevicePtr(4*lo), n: cn,
				first: lo == 0, ms: ms[i].ref.st, vs: vs[i].ref.st,
			}})
		}
	}
	direct(pending, len(ps))
	return units, f
}

// PreparePipelineRing makes dev's copy ring now unless STRATA_PIPELINE_RING
// is 0 (nothing then, or on the CPU), while the device budget has
// room for its slots: made at the first pipelined update instead, it would
// find the budget filled by the step's gradients and be refused. The error
// says why there is no ring; the pipelined update then reads its moments
// over the bus as without it.
func PreparePipelineRing(dev Device) error {
	d, ok := dev.(*cudaDevice)
	if !ok || !pipelineRing {
		return nil
	}
	d.ringFor("PreparePipelineRing")
	return d.ring.failure()
}

// failure is why the ring could not be made, nil when it was or was not
// asked for yet.
func (r *cudaRing) failure() error {
	if e := r.err.Load(); e != nil {
		return *e
	}
	return nil
}

// PipelineRingState reports whether dev's pipelined updates use the copy
// ring (unless STRATA_PIPELINE_RING=0), and, when it was asked for and could not
// be made, why (no room under the device budget, say); false and nil when
// it is off or not yet asked for.
func PipelineRingState(dev Device) (bool, error) {
	d, ok := dev.(*cudaDevice)
	if !ok || !pipelineRing {
		return false, nil
	}
	if d.ring.ready.Load() {
		return true, nil
	}
	return false, d.ring.failure()
}
