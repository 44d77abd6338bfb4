package tensor

import (
	"errors"
	"math"
	"math/bits"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

func boolArg(v bool) int32 {
	if v {
		return 1
	}
	return 0
}

func (b cudaBackend) softmax(dst, src *Tensor, rows, cols int, log bool) {
	b.softmaxRows("Softmax", dst, src, rows, cols, log, 0)
}

func (b cudaBackend) softmaxBackward(dx, y, dy *Tensor, rows, cols int, log bool) {
	b.softmaxBackwardRows("SoftmaxBackward", dx, y, dy, rows, cols, log, 0)
}

// causalSoftmax is the softmax kernel told the matrices' row count: each
// row then reads and normalises only the elements the causal mask keeps.
func (b cudaBackend) causalSoftmax(dst, src *Tensor, batch, rows, cols int) {
	b.softmaxRows("CausalSoftmax", dst, src, batch*rows, cols, false, rows)
}

func (b cudaBackend) causalSoftmaxBackward(dx, y, dy *Tensor, batch, rows, cols int) {
	b.softmaxBackwardRows("CausalSoftmaxBackward", dx, y, dy, batch*rows, cols, false, rows)
}

// softmaxRows launches the row softmax kernels (kernels/softmax.cuh) over
// rows rows, under the causal mask of mrows-row matrices when mrows > 0.
func (b cudaBackend) softmaxRows(op string, dst, src *Tensor, rows, cols int, log bool, mrows int) {
	d := b.d
	f := floatIndex(op, dst.dtype)
	if rows*cols == 0 {
		return
	}
	v, grid, block := rowShape(rows, cols)
	d.launch(op, d.k.softmax[v][f], grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(dst)).Ptr(devPtr(src)).Int64(int64(rows)).Int64(int64(cols)).Int32(boolArg(log)).Int64(int64(mrows))
	})
}

func (b cudaBackend) softmaxBackwardRows(op string, dx, y, dy *Tensor, rows, cols int, log bool, mrows int) {
	d := b.d
	f := floatIndex(op, dx.dtype)
	if rows*cols == 0 {
		return
	}
	v, grid, block := rowShape(rows, cols)
	d.launch(op, d.k.softmaxBackward[v][f], grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(dx)).Ptr(devPtr(y)).Ptr(devPtr(dy)).Int64(int64(rows)).Int64(int64(cols)).Int32(boolArg(log)).Int64(int64(mrows))
	})
}

// layerNorm runs a warp per row (kernels/layernorm.cuh); a half y (of
// float32 x) runs layernorm_to_f32_f16 or _bf16.
func (b cudaBackend) layerNorm(y, mean, rstd, x, w, bias *Tensor, rows, cols int, eps float64) {
	d := b.d
	f := floatIndex("LayerNorm", x.dtype)
	if rows == 0 {
		return
	}
	fn := d.k.layerNorm[f]
	switch y.dtype {
	case Float16:
		fn = d.k.layerNormTo[0]
	case BFloat16:
		fn = d.k.layerNormTo[1]
	}
	_, grid, block := rowShape(rows, 0)
	d.launch("LayerNorm", fn, grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(y)).Ptr(devPtr(mean)).Ptr(devPtr(rstd)).Ptr(devPtr(x)).Ptr(devPtr(w)).Ptr(devPtr(bias)).
			Int64(int64(rows)).Int64(int64(cols)).Float64(eps)
	})
}

// layerNormBackward writes dx with one kernel and, when dw or db are
// wanted, reduces them over fixed row chunks into double partials that a
// last kernel adds in order (no atomics: deterministic). Float32 rows of
// a multiple of 4 columns, up to 4 lnMaxWords words a lane, aligned, take
// the register path (kernels/layernorm.cuh): one kernel reads x and dy
// once for dx and the partials, a chunk a block; the rest take dx and
// the partials as two kernels.
func (b cudaBackend) layerNormBackward(dx, dw, db, dy, x, mean, rstd, w *Tensor, rows, cols int) {
	d := b.d
	f := floatIndex("LayerNormBackward", dx.dtype)
	if rows*cols == 0 {
		for _, t := range []*Tensor{dw, db} {
			if t != nil { // no rows: zero sums, which no kernel writes
				b.fill(t, 0)
			}
		}
		return
	}
	sums := dw != nil || db != nil
	if words, ok := lnRegWords(f, cols, dx, dy, x, w); ok {
		chunks := max(1, min(ceilDiv(rows, lnRegWarps), 2*d.props.Multiprocessors))
		var part *memory.Allocation
		pp := cuda.DevicePtr(0)
		if sums {
			part = d.scratch("LayerNormBackward", 2*chunks*cols)
			defer freeScratch(part)
			pp = scratchPtr(part)
		}
		d.launch("LayerNormBackward", d.k.lnBackwardReg[words-1], [3]uint32{uint32(chunks), 1, 1}, [3]uint32{32 * lnRegWarps, 1, 1}, func(a *cuda.Args) {
			a.Ptr(devPtr(dx)).Ptr(pp).Ptr(devPtr(dy)).Ptr(devPtr(x)).Ptr(devPtr(mean)).Ptr(devPtr(rstd)).Ptr(devPtr(w)).
				Int64(int64(rows)).Int64(int64(cols))
		})
		if sums {
			b.lnDwdbFinal(f, dw, db, pp, cols, chunks)
		}
		return
	}
	_, grid, block := rowShape(rows, 0)
	d.launch("LayerNormBackward", d.k.lnBackwardDx[f], grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(dx)).Ptr(devPtr(dy)).Ptr(devPtr(x)).Ptr(devPtr(mean)).Ptr(devPtr(rstd)).Ptr(devPtr(w)).
			Int64(int64(rows)).Int64(int64(cols))
	})
	if !sums {
		return
	}
	colBlocks := ceilDiv(cols, 32)
	chunks, rowsPer := chunking(rows, colBlocks, reduceMinRows)
	part := d.scratch("LayerNormBackward", 2*chunks*cols)
	defer freeScratch(part)
	d.launch("LayerNormBackward", d.k.lnDwdbPartial[f], [3]uint32{uint32(colBlocks), uint32(chunks), 1}, [3]uint32{32, 8, 1}, func(a *cuda.Args) {
		a.Ptr(scratchPtr(part)).Ptr(devPtr(dy)).Ptr(devPtr(x)).Ptr(devPtr(mean)).Ptr(devPtr(rstd)).
			Int64(int64(rows)).Int64(int64(cols)).Int64(int64(rowsPer))
	})
	b.lnDwdbFinal(f, dw, db, scratchPtr(part), cols, chunks)
}

// lnDwdbFinal adds the chunks' partial sums in order into dw and db
// (either may be nil): blocks of 32 columns x lnFinalGroups chunk groups.
func (b cudaBackend) lnDwdbFinal(f int, dw, db *Tensor, part cuda.DevicePtr, cols, chunks int) {
	grid, block := [3]uint32{uint32(ceilDiv(cols, 32)), 1, 1}, [3]uint32{32 * lnFinalGroups, 1, 1}
	b.d.launch("LayerNormBackward", b.d.k.lnDwdbFinal[f], grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(dw)).Ptr(devPtr(db)).Ptr(part).Int64(int64(cols)).Int32(int32(chunks))
	})
}

// The register path of the layer norm backward: lnRegWarps warps (rows)
// a block, rows of up to 128 lnMaxWords float32 columns (LN_MAXV).
const (
	lnMaxWords    = 8
	lnRegWarps    = 8
	lnFinalGroups = 16 // LN_FINAL_GROUPS
)

// lnRegWords returns the float4 words a lane holds on the register path
// (ceil(cols / 128)), and whether the path applies: float32, cols a
// multiple of 4 up to 128 lnMaxWords, every pointer 16-byte aligned.
func lnRegWords(f, cols int, ts ...*Tensor) (int, bool) {
	if f != kF32 || cols%4 != 0 || cols > 128*lnMaxWords {
		return 0, false
	}
	for _, t := range ts {
		if t != nil && peekPtr(t)%16 != 0 {
			return 0, false
		}
	}
	return ceilDiv(cols, 128), true
}

// gather checks ids on the device: an id out of range is reported at the
// next synchronization (its row of dst is zeroed), so the error returned
// here is always nil.
func (b cudaBackend) gather(dst, table, ids *Tensor, dim, rows int) error {
	d, nids := b.d, ids.Numel()
	if nids == 0 { // rows of 0 elements still have their ids checked, as on the CPU
		return nil
	}
	// A block a row (kernels/embedding.cuh), the grid striding past maxGridX.
	d.launch("Embedding", d.k.gather[sizeIndex(table.dtype)], [3]uint32{uint32(min(nids, maxGridX)), 1, 1}, block1, func(a *cuda.Args) {
		a.Ptr(devPtr(dst)).Ptr(devPtr(table)).Ptr(devPtr(ids)).Int64(int64(nids)).Int64(int64(dim)).Int64(int64(rows))
		d.status.args(a)
	})
	return nil
}

// sortTile is SORT_TILE of kernels/embedding.cuh: the keys one block sorts
// in shared memory.
const sortTile = 2048

// scatterAdd is deterministic (kernels/embedding.cuh): the positions are
// sorted by id with a bitonic sort of (id, position) keys, then a block
// per run of equal ids adds its rows in position order, as the CPU does,
// so the result is the CPU's bit for bit. For n ids that is 3 + L(L+3)/2
// launches, L = log2(n/2048): 3 up to 2,048 ids, 8 for the 8,192 of a
// gpt2 batch.
// Bad ids are reported at the next synchronization and skipped.
func (b cudaBackend) scatterAdd(dtable, dout, ids *Tensor, dim, rows int) error {
	const op = "EmbeddingBackward"
	d, nids := b.d, ids.Numel()
	f := floatIndex(op, dtable.dtype)
	if nids == 0 {
		return nil
	}
	if nids > math.MaxUint32 {
		fail(op, ErrShape, "%d ids: at most %d (positions are 32-bit in the sort keys)", nids, uint32(math.MaxUint32))
	}
	npad := 1 << bits.Len(uint(nids-1))
	keys := d.scratch(op, npad)
	defer freeScratch(keys)
	kp := scratchPtr(keys)
	d.launch1(op, d.k.scatterKeys, npad, func(a *cuda.Args) {
		a.Ptr(kp).Ptr(devPtr(ids)).Int64(int64(nids)).Int64(int64(npad)).Int64(int64(rows))
		d.status.args(a)
	})
	if dim == 0 { // nothing to add: the keys kernel has checked the ids, as the CPU does
		return nil
	}
	tile := min(npad, sortTile)
	sortTiles := func(kmin int) {
		d.launch(op, d.k.sortKeysTile, [3]uint32{uint32(npad / tile), 1, 1}, [3]uint32{1024, 1, 1}, func(a *cuda.Args) {
			a.Ptr(kp).Int64(int64(npad)).Int64(int64(kmin))
		})
	}
	sortTiles(0)
	for k := 2 * tile; k <= npad; k <<= 1 {
		for j := k / 2; j >= tile; j >>= 1 {
			d.launch1(op, d.k.sortKeysStep, npad, func(a *cuda.Args) {
				a.Ptr(kp).Int64(int64(npad)).Int64(int64(k)).Int64(int64(j))
			})
		}
		sortTiles(k)
	}
	d.launch(op, d.k.scatterRuns[f], [3]uint32{uint32(min(npad, maxGridX)), 1, 1}, block1, func(a *cuda.Args) {
		a.Ptr(devPtr(dtable)).Ptr(devPtr(dout)).Ptr(kp).Int64(int64(npad)).Int64(int64(dim))
	})
	return nil
}

// crossEntropy must return the count of counted rows, so it waits for the
// device: the loss kernel, then countTargets. Since it waits anyway, a bad
// target is returned here as on the CPU.
func (b cudaBackend) crossEntropy(loss, logits, targets *Tensor, rows, cols, ld int, ignore int32) (int, error) {
	d := b.d
	f := floatIndex("CrossEntropy", logits.dtype)
	if rows == 0 {
		return 0, nil
	}
	v, grid, block := rowShape(rows, cols)
	d.launch("CrossEntropy", d.k.crossEntropy[v][f], grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(loss)).Ptr(devPtr(logits)).Ptr(devPtr(targets)).Int64(int64(rows)).Int64(int64(cols)).Int64(int64(ld)).Int32(ignore)
		d.status.args(a)
	})
	return b.countTargets(targets, rows, ignore)
}

// meanDivisor runs mean_divisor_f32 or _f64 (one block): the count, or
// 1, into dst, on the stream, without waiting.
func (b cudaBackend) meanDivisor(dst, targets *Tensor, rows int, ignore int32) {
	d := b.d
	f := floatIndex("MeanDivisor", dst.dtype)
	d.launch("MeanDivisor", d.k.meanDivisor[f], [3]uint32{1, 1, 1}, [3]uint32{1024, 1, 1}, func(a *cuda.Args) {
		a.Ptr(devPtr(dst)).Ptr(devPtr(targets)).Int64(int64(rows)).Int32(ignore)
	})
}

// countTargets runs a counting kernel writing into the status block and
// synchronizes once; a bad target reported by a cross-entropy kernel
// since the last synchronization is returned as the error, any other
// op's report raised as its own.
func (b cudaBackend) countTargets(targets *Tensor, rows int, ignore int32) (int, error) {
	d := b.d
	if rows == 0 {
		return 0, nil
	}
	d.resultMu.Lock()
	defer d.resultMu.Unlock()
	d.launch("CrossEntropy", d.k.countTargets, [3]uint32{1, 1, 1}, [3]uint32{1024, 1, 1}, func(a *cuda.Args) {
		a.Ptr(d.status.dev).Ptr(devPtr(targets)).Int64(int64(rows)).Int32(ignore)
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.syncLocked(); err != nil {
		var oe *OpError
		if errors.As(err, &oe) && oe.Op == "CrossEntropy" {
			return 0, errors.New(oe.Msg)
		}
		if oe != nil {
			panic(oe) // an earlier op's report
		}
		panic(&OpError{Op: "CrossEntropy", Msg: "synchronizing " + d.name, Err: err})
	}
	return int(d.status.words.count), nil
}

// ceFusedBlocksPerSM is the fused cross-entropy's blocks a multiprocessor:
// the MINB of its block kernels' __launch_bounds__(512, 3)
// (kernels/crossentropy.cuh; 40 registers, no spills).
const ceFusedBlocksPerSM = 3

// crossEntropyFused launches one kernel for the loss and the gradient.
// Each row is read twice (its max and sum, then its gradient); with a
// block per row, the grid is ceFusedBlocksPerSM blocks a multiprocessor,
// whatever the row's size: fewer blocks leave the kernel latency-bound.
// Session 9 sized the grid to keep the rows in flight within a quarter of
// L2, then half (so that the second read finds the row there): the bf16
// head's 156 blocks ran at 30% occupancy and 13% of the memory bandwidth;
// session 15's ncu found the float32 head (201 KB rows, half of L2 giving
// 156 blocks on the H200) at the same 30% and 16% of DRAM bandwidth, 0.78
// ms a chunk; at two blocks an SM (56 registers) 0.58 ms, at three (40
// registers) 0.45 ms, 66% occupancy, 35% of DRAM.
func (b cudaBackend) crossEntropyFused(loss, dlogits, logits, targets, dloss *Tensor, rows, cols, ld int, ignore int32) {
	d := b.d
	op := "CrossEntropyFused"
	i := ceFusedIndex(op, logits.dtype, dlogits.dtype)
	if rows == 0 {
		return
	}
	v, grid, block := rowShape(rows, cols)
	if v == kBlock {
		grid[0] = uint32(max(1, min(rows, ceFusedBlocksPerSM*d.props.Multiprocessors)))
	}
	d.launch(op, d.k.crossEntropyFused[v][i], grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(loss)).Ptr(devPtr(dlogits)).Ptr(devPtr(logits)).Ptr(devPtr(targets)).Ptr(devPtr(dloss)).
			Int64(int64(rows)).Int64(int64(cols)).Int64(int64(ld)).Int32(ignore)
		d.status.args(a)
	})
}

// ceFusedSuffix names the fused cross-entropy kernels' (logits, gradient)
// dtypes, in the order of cudaKernels.crossEntropyFused.
var ceFusedSuffix = [6]string{"f32_f32", "f32_f16", "f32_bf16", "f64_f64", "f16_f16", "bf16_bf16"}

// ceFusedIndex returns the fused kernel for logits of dtype lt and a
// gradient of dtype gt.
func ceFusedIndex(op string, lt, gt DType) int {
	switch {
	case lt == Float32 && gt == Float32:
		return 0
	case lt == Float32 && gt == Float16:
		return 1
	case lt == Float32 && gt == BFloat16:
		return 2
	case lt == Float64 && gt == Float64:
		return 3
	case lt == Float16 && gt == Float16:
		return 4
	case lt == BFloat16 && gt == BFloat16:
		return 5
	}
	fail(op, ErrDType, "%v logits with a %v gradient: want float32 logits (float32, float16 or bfloat16 gradient), float64 (float64) or half logits (the same half type)", lt, gt)
	return 0
}

// crossEntropyBackward zeroes the rows of bad targets and reports them at
// the next synchronization (the CPU panics at once).
func (b cudaBackend) crossEntropyBackward(dlogits, logits, targets, dloss *Tensor, rows, cols, ld int, ignore int32) {
	d := b.d
	f := floatIndex("CrossEntropyBackward", logits.dtype)
	if rows == 0 { // rows of 0 classes still have their targets checked, as on the CPU
		return
	}
	v, grid, block := rowShape(rows, cols)
	d.launch("CrossEntropyBackward", d.k.crossEntropyBackward[v][f], grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(dlogits)).Ptr(devPtr(logits)).Ptr(devPtr(targets)).Ptr(devPtr(dloss)).
			Int64(int64(rows)).Int64(int64(cols)).Int64(int64(ld)).Int32(ignore)
		d.status.args(a)
	})
}
