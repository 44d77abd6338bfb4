package tensor

import (
	"encoding/binary"
	"math"

	"github.com/strata-ml/strata/cuda"
)

// Optimizer steps (kernels/optim.cuh) repeat cpukern.AdamW's and
// cpukern.SGD's arithmetic with explicitly rounded operations: float32
// AdamW in float32 as PyTorch, SGD and float64 AdamW in float64.

func (b cudaBackend) adamw(p, g, m, v *Tensor, lr, beta1, beta2, eps, wd float64, step int) {
	d, n := b.d, p.Numel()
	d.refuseInCapture("AdamW", "an update whose step constants are kernel arguments (use AdamWStepsGuarded)")
	f := floatIndex("AdamW", p.dtype)
	if n == 0 {
		return
	}
	c := adamwConstants(f, lr, beta1, beta2, eps, step)
	d.launch1("AdamW", d.k.adamw[f], n, func(a *cuda.Args) {
		a.Ptr(devPtr(p)).Ptr(devPtr(g)).Ptr(devPtr(m)).Ptr(devPtr(v)).Int64(int64(n))
		argT(a, f, 1-float64(lr*wd))
		c.args(a, f)
	})
}

// adamwChunk is the elements of a row of adamw_multi's table, which one
// block updates: 64 Ki, 256 a thread.
const adamwChunk = 1 << 16

// adamwMulti updates every parameter in one launch: a table of
// AdamWChunk rows (kernels/optim.cuh: p, g, m, v, n, decay, the
// gradient's dtype), one a block on the device's stream, uploaded on the
// stream. GPT-2's 148 parameters were 148 launches.
func (b cudaBackend) adamwMulti(ps, gs, ms, vs []*Tensor, wd []float64, lr, beta1, beta2, eps float64, step int) {
	b.d.adamwTable(nil, ps, gs, ms, vs, wd, lr, beta1, beta2, eps, step, devPtr)
}

// adamwTable uploads adamw_multi's table for the parameters and launches
// it, on side stream s (nil: the device's stream, a block a row; the side
// stream, AdamWStepsOverlapped's groups: sideGrid's few blocks striding
// over the rows, as the pipelined update's), reading addresses with ptr.
func (d *cudaDevice) adamwTable(s *cudaSide, ps, gs, ms, vs []*Tensor, wd []float64, lr, beta1, beta2, eps float64, step int, ptr func(*Tensor) cuda.DevicePtr) {
	rows, f := adamwRows(ps, gs, ms, vs, wd, lr, ptr)
	if len(rows) == 0 {
		return
	}
	c := adamwConstants(f, lr, beta1, beta2, eps, step)
	tab := d.tableOn(s, "AdamW", rows)
	defer freeScratch(tab) // reused on s only, after the launch
	n := len(rows) / adamwRowBytes
	grid := n
	if s != nil {
		grid = d.sideGrid(n, 0)
	}
	d.launchOn(s, "AdamW", d.k.adamwMulti[f], [3]uint32{uint32(grid), 1, 1}, block1, func(a *cuda.Args) {
		a.Ptr(scratchPtr(tab)).Int32(int32(n))
		c.args(a, f)
	})
}

// adamwGuarded is AdamWStepsGuarded on the device: adamw_multi_guarded
// over a table whose rows hold each parameter's weight decay (the kernel
// forms the decay factor from the learning rate in a), reading the step's
// constants from a and the skip flag from guard when it runs.
func (b cudaBackend) adamwGuarded(ps, gs, ms, vs []*Tensor, wd []float64, a *AdamWArgs, guard *StepGuard) {
	d := b.d
	for _, m := range [...]*cudaMapped{a.cu, guardBlock(guard)} {
		if err := m.live("AdamW"); err != nil {
			panic(err)
		}
	}
	rows, f := adamwRowsWith(ps, gs, ms, vs, func(i int) float64 { return wd[i] }, devPtr)
	if len(rows) == 0 {
		return
	}
	var g cuda.DevicePtr
	if guard != nil {
		g = guard.cu.dev
	}
	d.launchTable("AdamW", d.k.adamwMultiGuarded[f], [3]uint32{uint32(len(rows) / adamwRowBytes), 1, 1}, rows, func(args *cuda.Args, tab cuda.DevicePtr) {
		args.Ptr(tab).Ptr(a.cu.dev).Ptr(g)
	})
}

// guardBlock is guard's mapped block, nil for a nil guard.
func guardBlock(guard *StepGuard) *cudaMapped {
	if guard == nil {
		return nil
	}
	return guard.cu
}

// adamwRows lays out adamw_multi's table for the parameters (their
// addresses from ptr) and returns it with the dtype's float index (-1
// when every parameter is empty).
func adamwRows(ps, gs, ms, vs []*Tensor, wd []float64, lr float64, ptr func(*Tensor) cuda.DevicePtr) (rows []byte, f int) {
	// float64(...) rounds the product: no fused multiply-add, so the
	// factor is the one adamw_multi_guarded forms with __dmul_rn, __dsub_rn.
	return adamwRowsWith(ps, gs, ms, vs, func(i int) float64 { return 1 - float64(lr*wd[i]) }, ptr)
}

// adamwRowsWith is adamwRows with row field decay(i) for parameter i.
func adamwRowsWith(ps, gs, ms, vs []*Tensor, decay func(i int) float64, ptr func(*Tensor) cuda.DevicePtr) (rows []byte, f int) {
	f = -1
	rowCount := 0
	for _, p := range ps {
		rowCount += ceilDiv(p.Numel(), adamwChunk)
	}
	rows = make([]byte, 0, adamwRowBytes*rowCount)
	for i, p := range ps {
		n := p.Numel()
		if n == 0 {
			continue
		}
		f = floatIndex("AdamW", p.dtype)
		// Each address once a parameter: ptr counts an access (the
		// placement's touches) and joins fences.
		ts := [4]*Tensor{p, gs[i], ms[i], vs[i]}
		var base [4]uint64
		for k, t := range ts {
			base[k] = uint64(ptr(t))
		}
		for lo := 0; lo < n; lo += adamwChunk {
			var addr [4]uint64
			for k, t := range ts {
				addr[k] = base[k] + uint64(lo*t.dtype.Size())
			}
			rows = appendAdamWRow(rows, addr, min(adamwChunk, n-lo), decay(i), adamwGradType(p, gs[i]))
		}
	}
	return rows, f
}

// appendAdamWRow appends a row of adamw_multi's table (struct AdamWChunk
// of kernels/optim.cuh): the addresses of the parameter, gradient, first
// and second moment of its n elements, the decay factor and the gradient's
// type.
func appendAdamWRow(rows []byte, addr [4]uint64, n int, decay float64, gdt int32) []byte {
	for _, a := range addr {
		rows = binary.LittleEndian.AppendUint64(rows, a)
	}
	rows = binary.LittleEndian.AppendUint64(rows, uint64(n))
	rows = binary.LittleEndian.AppendUint64(rows, math.Float64bits(decay))
	return binary.LittleEndian.AppendUint64(rows, uint64(gdt))
}

// adamwGradType is AdamWChunk.gdt for parameter p's gradient g
// (kernels/optim.cuh): 0 in p's dtype, 1 bfloat16, 2 float16 (of a
// float32 p).
func adamwGradType(p, g *Tensor) int32 {
	switch {
	case g.dtype == p.dtype:
		return 0
	case g.dtype == BFloat16:
		return 1
	}
	return 2
}

// adamwConsts are a step's constants, computed as cpukern.AdamW does;
// float32 takes them rounded to float32 (argT), float64 with bc2Sqrt
// folded into stepSize and eps.
type adamwConsts struct {
	w1, beta2, w2, stepSize, bc2Sqrt, eps float64
	lerpLow                               int32 // torch.lerp's two forms (float32 only)
}

func adamwConstants(f int, lr, beta1, beta2, eps float64, step int) adamwConsts {
	w1, w2 := 1-beta1, 1-beta2
	stepSize := lr / (1 - math.Pow(beta1, float64(step)))
	bc2Sqrt := math.Sqrt(1 - math.Pow(beta2, float64(step)))
	if f == kF64 {
		stepSize, eps = stepSize*bc2Sqrt, eps*bc2Sqrt
	}
	return adamwConsts{w1, beta2, w2, stepSize, bc2Sqrt, eps, boolArg(float32(w1) < 0.5)}
}

// args appends w1, beta2, w2, stepSize, bc2Sqrt, eps and lerpLow.
func (c adamwConsts) args(a *cuda.Args, f int) {
	for _, v := range [...]float64{c.w1, c.beta2, c.w2, c.stepSize, c.bc2Sqrt, c.eps} {
		argT(a, f, v)
	}
	a.Int32(c.lerpLow)
}

func (b cudaBackend) sgd(p, g, buf *Tensor, lr, momentum, wd float64, nesterov bool) {
	d, n := b.d, p.Numel()
	f := floatIndex("SGD", p.dtype)
	if n == 0 {
		return
	}
	d.launch1("SGD", d.k.sgd[f], n, func(a *cuda.Args) {
		a.Ptr(devPtr(p)).Ptr(devPtr(g)).Ptr(devPtr(buf)).Int64(int64(n)).
			Float64(lr).Float64(momentum).Float64(wd).Int32(boolArg(nesterov))
	})
}
