package tensor

import (
	"encoding/binary"
	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// Reductions (kernels/reduce.cuh) accumulate in float64 without atomics.
// When the outputs alone would give fewer than reduceTargetBlocks blocks,
// mid is cut into chunks (of at least reduceMinChunk elements, or
// reduceMinRows rows of a column reduction) whose partials a second kernel
// adds in order. The chunking depends only on the sizes, so a result is
// the same on every run and every GPU.
const (
	reduceTargetBlocks = 1024
	reduceMinChunk     = 4096
	reduceMinRows      = 64
	reduceMaxChunks    = 4096
)

// chunking splits mid into chunks of chunkLen for outputs that occupy
// blocks blocks of the grid on their own.
func chunking(mid, blocks, minLen int) (chunks, chunkLen int) {
	if mid == 0 {
		return 1, 1
	}
	chunks = 1
	if blocks < reduceTargetBlocks {
		chunks = min(ceilDiv(reduceTargetBlocks, blocks), ceilDiv(mid, minLen), reduceMaxChunks)
		chunks = max(chunks, 1)
	}
	chunkLen = ceilDiv(mid, chunks)
	return ceilDiv(mid, chunkLen), chunkLen
}

func (b cudaBackend) reduceSum(dst, src *Tensor, outer, mid, inner int, acc bool) {
	b.d.reduce("Sum", kSum, dst, src, outer, mid, inner, acc)
}

func (b cudaBackend) reduceMax(dst, src *Tensor, outer, mid, inner int) {
	b.d.reduce("Max", kMax, dst, src, outer, mid, inner, false)
}

func (d *cudaDevice) reduce(op string, kind int, dst, src *Tensor, outer, mid, inner int, acc bool) {
	f := floatIndex(op, dst.dtype)
	total := outer * inner
	if total == 0 {
		return
	}
	accumulate := int32(0)
	if acc {
		accumulate = 1
	}
	gy := min(outer, maxGridYZ)
	var chunks, chunkLen int
	var grid, block [3]uint32
	var fn *cuda.Function
	if inner == 1 {
		chunks, chunkLen = chunking(mid, outer, reduceMinChunk)
		grid, block, fn = [3]uint32{uint32(chunks), uint32(gy), 1}, block1, d.k.reduceRows[kind][f]
	} else {
		cols := ceilDiv(inner, 32)
		chunks, chunkLen = chunking(mid, cols*outer, reduceMinRows)
		grid, block, fn = [3]uint32{uint32(cols), uint32(gy), uint32(chunks)}, [3]uint32{32, 8, 1}, d.k.reduceCols[kind][f]
	}
	var part *memory.Allocation
	if chunks > 1 {
		part = d.scratch(op, chunks*total)
		defer freeScratch(part)
	}
	d.launch(op, fn, grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(dst)).Ptr(scratchPtr(part)).Ptr(devPtr(src)).Int64(int64(outer)).Int64(int64(mid))
		if inner != 1 {
			a.Int64(int64(inner))
		}
		a.Int64(int64(chunkLen)).Int32(accumulate)
	})
	if chunks > 1 {
		d.launch1(op, d.k.reduceFinal[kind][f], total, func(a *cuda.Args) {
			a.Ptr(devPtr(dst)).Ptr(scratchPtr(part)).Int64(int64(total)).Int32(int32(chunks)).Int32(accumulate)
		})
	}
}

func scratchPtr(a *memory.Allocation) cuda.DevicePtr {
	if a == nil {
		return 0
	}
	return cuda.DevicePtr(a.Addr())
}

// sumSquares reduces every tensor's chunks into one partials array, sums
// the partials in one block and synchronizes once, then reads the status
// block's scalar slot: no copy. A lone tensor takes one launch of
// sum_squares (a lone chunk writes the slot itself); several take one
// launch of sum_squares_multi per dtype, over a table of their chunks
// (the same chunks and partial slots, so the same sum). A gradient norm
// over GPT-2's 148 parameters was 148 synchronizations a step when each
// tensor took its own, then 148 launches of a few microseconds each.
func (b cudaBackend) sumSquares(srcs []*Tensor) float64 {
	d := b.d
	d.resultMu.Lock() // one reader of the scalar slot at a time
	defer d.resultMu.Unlock()
	if !b.sumSquaresInto(d.status.dev, srcs) {
		return 0
	}
	d.syncForResult("SumSquares")
	return d.status.words.scalar
}

// sumSquaresKind is the sum_squares_multi kernel a dtype's tensors go to
// (cudaKernels.sumSquaresMulti): 0 float32, 1 float64 (floatIndex's), 2
// bfloat16, 3 float16.
func sumSquaresKind(dt DType) int {
	switch dt {
	case BFloat16:
		return 2
	case Float16:
		return 3
	}
	return floatIndex("SumSquares", dt)
}

// sumSquaresInto queues the sum of squares of srcs into the scalar slot
// of the Status block at st (the device's own, or a StepGuard's) and
// reports whether it queued anything (false: no elements, slot untouched).
func (b cudaBackend) sumSquaresInto(st cuda.DevicePtr, srcs []*Tensor) bool {
	d := b.d
	type job struct {
		t             *Tensor
		f, at, chunks int
		chunkLen      int
	}
	var jobs []job
	total := 0
	// Several tensors share one grid: chunks of at least 1/reduceMaxChunks
	// of all their elements, so that a model's gradients (GPT-2's 124M in
	// 148 tensors) make a few thousand table rows, not tens of thousands
	// for the host to write and upload every step.
	minChunk, all := reduceMinChunk, 0
	for _, t := range srcs {
		all += t.Numel()
	}
	if len(srcs) > 1 {
		minChunk = max(minChunk, ceilDiv(all, reduceMaxChunks))
	}
	half := false
	for _, t := range srcs {
		f, n := sumSquaresKind(t.dtype), t.Numel()
		if n == 0 {
			continue
		}
		half = half || f >= 2
		chunks, chunkLen := chunking(n, 1, minChunk)
		jobs = append(jobs, job{t: t, f: f, at: total, chunks: chunks, chunkLen: chunkLen})
		total += chunks
	}
	if total == 0 {
		return false
	}
	// Half tensors have only the multi-tensor kernel, whose partials
	// sum_partials adds even when there is one.
	partials := total > 1 || half
	var part *memory.Allocation
	if partials {
		part = d.scratch("SumSquares", total)
		defer freeScratch(part)
	}
	base := scratchPtr(part)
	if len(jobs) == 1 && !half {
		j := jobs[0]
		d.launch("SumSquares", d.k.sumSquares[j.f], [3]uint32{uint32(j.chunks), 1, 1}, block1, func(a *cuda.Args) {
			a.Ptr(st).Ptr(base).Ptr(devPtr(j.t)).Int64(int64(j.t.Numel())).Int64(int64(j.chunkLen))
		})
	} else {
		var rows [4][]byte // SqChunk rows by kind (sumSquaresKind): x, lo, hi, slot
		var size [4]int
		for _, j := range jobs {
			size[j.f] += 32 * j.chunks
		}
		for f := range rows {
			rows[f] = make([]byte, 0, size[f])
		}
		for _, j := range jobs {
			x, n := uint64(devPtr(j.t)), j.t.Numel()
			for c := range j.chunks {
				lo := c * j.chunkLen
				for _, w := range [...]uint64{x, uint64(lo), uint64(min(n, lo+j.chunkLen)), uint64(j.at + c)} {
					rows[j.f] = binary.LittleEndian.AppendUint64(rows[j.f], w)
				}
			}
		}
		for f, r := range rows {
			if len(r) == 0 {
				continue
			}
			d.launchTable("SumSquares", d.k.sumSquaresMulti[f], [3]uint32{uint32(len(r) / 32), 1, 1}, r, func(a *cuda.Args, tab cuda.DevicePtr) {
				a.Ptr(base).Ptr(tab)
			})
		}
	}
	if partials {
		d.launch("SumSquares", d.k.sumPartials, [3]uint32{1, 1, 1}, block1, func(a *cuda.Args) {
			a.Ptr(st).Ptr(base).Int32(int32(total))
		})
	}
	return true
}
