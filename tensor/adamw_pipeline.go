package tensor

import (
	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// AdamWStepsPipelined is AdamWSteps queued group by group, so that the next
// forward pass runs beside it and the gradients go back to the pool as
// their group is updated. ends are the groups' ends in ps, increasing, the
// last len(ps): group i is ps[ends[i-1]:ends[i]] (ps[:ends[0]] for the
// first); give them in the order the next forward pass reads them. After a
// group's update is queued, done(lo, hi) is called with its bounds (nil:
// nothing is called): the caller releases the group's gradients there, and
// the pool hands their blocks out again once that group's update has run,
// not the whole step's. The results are AdamWSteps' bit for bit (the same
// kernel and table rows, each parameter in one group), half gradients of
// float32 parameters included. Every argument is checked before any
// parameter changes.
//
// On a GPU the groups run on the device's side stream (cuda_side.go), a
// launch a group of at most width blocks, each striding over the group's
// rows (width <= 0: sideGrid's default), for a kernel that waits on the
// bus more than it computes; moments in pinned host memory go through the
// device's copy ring (cuda_ring.go), chunk by chunk, a launch a chunk. Each
// group's parameters and moments are fenced on the group's event (moments
// of the ring on their write-back's), and the first op that reads one of
// them waits for it on the device's stream, and for the parameters on the
// host as well: the host, which otherwise runs far ahead of the
// device, then queues the next forward pass a group at a time behind the
// update, and what it allocates for a group can reuse the gradients of the
// groups before it (with AdamWStepsOverlapped every gradient stayed
// pending until the whole update had run, through the forward pass). The
// backward pass starts once the update's kernels are over (WaitOverlapped).
//
// On the CPU it is AdamWSteps a group at a time, done called after each.
func AdamWStepsPipelined(ps, gs, ms, vs []*Tensor, wd []float64, lr, beta1, beta2, eps float64, step int, ends []int, width int, done func(lo, hi int)) {
	const op = "AdamW"
	adamwCheckLens(op, ps, gs, ms, vs, wd, step)
	for i, e := range ends {
		if lo := groupStart(ends, i); e <= lo || e > len(ps) {
			fail(op, ErrArgument, "group %d ends at %d after %d (of %d parameters): group ends must increase", i, e, lo, len(ps))
		}
	}
	if n := len(ends); n == 0 && len(ps) > 0 || n > 0 && ends[n-1] != len(ps) {
		fail(op, ErrArgument, "the last group must end at %d, the number of parameters (group ends %v)", len(ps), ends)
	}
	for i, p := range ps {
		adamwCheckParam(op, i, p, gs[i], ms[i], vs[i], true)
	}
	adamwCheckDisjoint(op, ps, gs, ms, vs)
	modified(ps...)
	modified(ms...)
	modified(vs...)
	// The CUDA runs (a group's parameters of one device and dtype; a
	// model's are all of one) go into one adamw_multi table a device and
	// dtype, uploaded once before any launch: a table a group would be an
	// upload a group (until session 21 synchronous on expandable segments,
	// which held the host until the group before had run).
	type track struct {
		d    *cudaDevice
		s    *cudaSide
		dt   DType
		f    int
		rows []byte
		tab  *memory.Allocation
	}
	type run struct {
		group, lo, hi int
		tr            *track     // nil: not CUDA
		units         []pipeUnit // the run's launches: rows of its track's table
	}
	var tracks []*track
	var runs []run
	for gi := range ends {
		for i := groupStart(ends, gi); i < ends[gi]; i++ {
			if n := len(runs); n > 0 && runs[n-1].group == gi && ps[i].dev == ps[i-1].dev && ps[i].dtype == ps[i-1].dtype {
				runs[n-1].hi = i + 1
			} else {
				runs = append(runs, run{group: gi, lo: i, hi: i + 1})
			}
		}
	}
	for k := range runs {
		r := &runs[k]
		cb, ok := ps[r.lo].dev.backend().(cudaBackend)
		if !ok {
			continue
		}
		for _, t := range tracks {
			if t.d == cb.d && t.dt == ps[r.lo].dtype {
				r.tr = t
			}
		}
		if r.tr == nil {
			r.tr = &track{d: cb.d, dt: ps[r.lo].dtype, f: -1}
			tracks = append(tracks, r.tr)
		}
		var f int
		r.units, f = pipeUnits(cb.d, &r.tr.rows, ps[r.lo:r.hi], gs[r.lo:r.hi], ms[r.lo:r.hi], vs[r.lo:r.hi], wd[r.lo:r.hi], lr)
		if f >= 0 {
			r.tr.f = f
		}
	}
	sides := map[*cudaDevice]*cudaSide{}
	for _, t := range tracks {
		if t.s = sides[t.d]; t.s == nil {
			t.s = t.d.startSide(op)
			t.d.traceStep()
			sides[t.d] = t.s
		}
		if len(t.rows) > 0 {
			t.tab = t.d.tableOn(t.s, op, t.rows)
			defer freeScratch(t.tab) // reused on the side stream only, after the launches
		}
	}
	for k, r := range runs {
		if r.tr == nil {
			ps[r.lo].dev.backend().adamwMulti(ps[r.lo:r.hi], gs[r.lo:r.hi], ms[r.lo:r.hi], vs[r.lo:r.hi], wd[r.lo:r.hi], lr, beta1, beta2, eps, step)
		} else {
			t := r.tr
			t.d.adamwPipelineRun(t.s, r.group, t.tab, r.units, t.f, ps[r.lo:r.hi], gs[r.lo:r.hi], ms[r.lo:r.hi], vs[r.lo:r.hi], lr, beta1, beta2, eps, step, width)
		}
		if done != nil && (k+1 == len(runs) || runs[k+1].group != r.group) {
			done(groupStart(ends, r.group), ends[r.group])
		}
	}
}

// sideAfterFences makes side stream s wait for the fences, other than its
// own, of what the group's kernels read on it: the parameters and
// gradients, and the moments that the copy ring does not bring in (its
// in-stream waits for theirs). A tensor moved by MoveTo just before the
// update carries the copy stream's fence, which the rows' raw addresses
// do not join.
func (d *cudaDevice) sideAfterFences(op string, s *cudaSide, units []pipeUnit, ps, gs, ms, vs []*Tensor) {
	ringed := map[*storage]bool{}
	for _, u := range units {
		if u.chunk != nil {
			ringed[u.chunk.ms], ringed[u.chunk.vs] = true, true
		}
	}
	for i := range ps {
		for _, t := range [...]*Tensor{ps[i], gs[i], ms[i], vs[i]} {
			st := t.ref.st
			if f := st.fence.Load(); f != nil && f.on != s.stream && !ringed[st] {
				d.check(op, "ordering the side stream after a fence", s.stream.WaitEvent(f.ev))
			}
		}
	}
}

// groupStart is the first index of group i of ends.
func groupStart(ends []int, i int) int {
	if i == 0 {
		return 0
	}
	return ends[i-1]
}

// adamwPipelineRun queues the update of a group's parameters ps on side
// stream s: its units' rows of the uploaded table tab, each in one launch
// of at most width blocks (sideGrid), those of the copy ring between its
// chunk's copy in and write-back (cuda_ring.go). It records group g's
// event, fences the parameters and moments on it (host and device stream;
// moments that went through the ring on the ring's write-back instead)
// and records the gradients' use on s, so that their blocks return to the
// pool once this group has run.
func (d *cudaDevice) adamwPipelineRun(s *cudaSide, g int, tab *memory.Allocation, units []pipeUnit, f int, ps, gs, ms, vs []*Tensor, lr, beta1, beta2, eps float64, step, width int) {
	const op = "AdamW"
	tr := d.traceGroupStart(s, g, ps, ms, vs)
	d.sideAfterFences(op, s, units, ps, gs, ms, vs)
	var ringed []*storage
	c := adamwConstants(f, lr, beta1, beta2, eps, step)
	for _, u := range units {
		if u.chunk != nil {
			d.chunkIn(op, &d.ring, s, *u.chunk)
		}
		if u.n > 0 {
			d.launchOn(s, op, d.k.adamwMulti[f], [3]uint32{uint32(d.sideGrid(u.n, width)), 1, 1}, block1, func(a *cuda.Args) {
				a.Ptr(scratchPtr(tab) + cuda.DevicePtr(u.row*adamwRowBytes)).Int32(int32(u.n))
				c.args(a, f)
			})
		}
		if ch := u.chunk; ch != nil {
			d.chunkOut(op, &d.ring, s, *ch)
			if ch.first {
				ringed = append(ringed, ch.ms, ch.vs)
			}
		}
	}
	end := s.stream // the group's update ends on its last write-back when it has some
	if len(ringed) > 0 {
		end = d.ring.out.stream
	}
	d.traceGroupEnd(end, tr)
	d.fenceGroup(op, s, g, true, tr, ps, gs, ms, vs)
	if len(ringed) > 0 {
		d.fenceRinged(op, &d.ring, g, ringed)
	}
}

// adamwRowBytes is the size of a row of adamw_multi's table
// (kernels/optim.cuh's AdamWChunk: p, g, m, v, n, decay, the gradient's
// dtype and a pad word).
const adamwRowBytes = 56
