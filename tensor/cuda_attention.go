package tensor

import (
	"math"
	"strconv"

	"github.com/strata-ml/strata/cuda"
)

// Fused attention on the GPU: kernels/attention.cuh, one kernel per input
// dtype (float32, float16, bfloat16), head size HD (16, 32, 64, 128; hd is
// rounded up and padded with zeros) and pass: forward, backward_dq (which
// also writes delta = rowsum(dout * out)) and backward_dkdv. Three
// launches in all for a forward and backward pass, none of them atomic.

var (
	attnDTypes = [3]DType{Float32, Float16, BFloat16}
	attnHeads  = [4]int{16, 32, 64, 128}
	// Rows of a block's tile per HD, as kernels/attention.cuh's
	// AttnFwdCfg::BR, AttnDqCfg::BR and AttnDkvCfg::KB say.
	attnFwdRows  = [4]int{64, 64, 64, 32}
	attnDqRows   = [4]int{64, 64, 32, 16}
	attnDkvRows  = [4]int{64, 64, 32, 16}
	attnMaxHead  = attnHeads[len(attnHeads)-1]
	attnThreads  = [3]uint32{256, 1, 1}
	attnPassName = [3]string{"forward", "backward_dq", "backward_dkdv"}
)

// attentionKernels is the slot of kernels/attention.cuh in cudaKernels:
// [pass][dtype][head size].
type attentionKernels [3][3][4]*cuda.Function

// bind adds the kernels' names to a bindings table.
func (k *attentionKernels) bind(m map[string]**cuda.Function) {
	for p, pass := range attnPassName {
		for i, dt := range attnDTypes {
			for j, hd := range attnHeads {
				m["attention_"+pass+"_"+castSuffix[dt]+"_h"+strconv.Itoa(hd)] = &k[p][i][j]
			}
		}
	}
}

// attentionVariant returns the kernels' dtype and head-size indexes for
// q and hd, refusing float64 and heads wider than the widest kernel.
func attentionVariant(op string, dt DType, hd int) (di, hi int) {
	di = -1
	for i, d := range attnDTypes {
		if d == dt {
			di = i
		}
	}
	if di < 0 {
		fail(op, ErrDType, "%v fused attention runs on the cpu only (float32, float16 and bfloat16 on cuda)", dt)
	}
	if hd > attnMaxHead {
		fail(op, ErrShape, "head size %d: the cuda kernels take at most %d", hd, attnMaxHead)
	}
	for hi < len(attnHeads)-1 && attnHeads[hi] < hd {
		hi++
	}
	return di, hi
}

// attnDropArgs appends the dropout arguments: seed, offset, the keep
// threshold ceil(p 2^32) (0: no dropout) and the float32 scale 1/(1-p).
func attnDropArgs(a *cuda.Args, p float64, seed, offset uint64) {
	thr, scale := uint64(0), 1.0
	if p > 0 {
		thr, scale = uint64(math.Ceil(p*0x1p32)), 1/(1-p)
	}
	a.Uint64(seed).Uint64(offset).Uint64(thr).Float32(float32(scale))
}

// attnGrid is one block per (head, tile of rows).
func attnGrid(op string, bh, t, rows int) [3]uint32 {
	n := bh * ceilDiv(t, rows)
	if n > maxGridX {
		fail(op, ErrShape, "%d heads of %d rows: %d blocks exceed the grid", bh, t, n)
	}
	return [3]uint32{uint32(n), 1, 1}
}

func (b cudaBackend) attentionForward(out, lse, q, k, v *Tensor, bh, t, hd int, scale, p float64, seed, offset uint64) {
	const op = "FusedCausalAttention"
	d := b.d
	di, hi := attentionVariant(op, q.dtype, hd)
	d.launch(op, d.k.attention[0][di][hi], attnGrid(op, bh, t, attnFwdRows[hi]), attnThreads, func(a *cuda.Args) {
		a.Ptr(devPtr(out)).Ptr(devPtr(lse)).Ptr(devPtr(q)).Ptr(devPtr(k)).Ptr(devPtr(v))
		a.Int64(int64(bh)).Int64(int64(t)).Int32(int32(hd)).Float32(float32(scale))
		attnDropArgs(a, p, seed, offset)
	})
}

// attentionBackward runs backward_dq, which writes delta into scratch,
// then backward_dkdv, which reads it (the stream orders them).
func (b cudaBackend) attentionBackward(dq, dk, dv, q, k, v, out, dout, lse *Tensor, bh, t, hd int, scale, p float64, seed, offset uint64) {
	const op = "FusedCausalAttentionBackward"
	d := b.d
	di, hi := attentionVariant(op, q.dtype, hd)
	delta := d.scratch(op, ceilDiv(bh*t, 2)) // bh*t float32
	defer freeScratch(delta)
	d.launch(op, d.k.attention[1][di][hi], attnGrid(op, bh, t, attnDqRows[hi]), attnThreads, func(a *cuda.Args) {
		a.Ptr(devPtr(dq)).Ptr(scratchPtr(delta)).Ptr(devPtr(q)).Ptr(devPtr(k)).Ptr(devPtr(v))
		a.Ptr(devPtr(out)).Ptr(devPtr(dout)).Ptr(devPtr(lse))
		a.Int64(int64(bh)).Int64(int64(t)).Int32(int32(hd)).Float32(float32(scale))
		attnDropArgs(a, p, seed, offset)
	})
	d.launch(op, d.k.attention[2][di][hi], attnGrid(op, bh, t, attnDkvRows[hi]), attnThreads, func(a *cuda.Args) {
		a.Ptr(devPtr(dk)).Ptr(devPtr(dv)).Ptr(devPtr(q)).Ptr(devPtr(k)).Ptr(devPtr(v))
		a.Ptr(devPtr(dout)).Ptr(devPtr(lse)).Ptr(scratchPtr(delta))
		a.Int64(int64(bh)).Int64(int64(t)).Int32(int32(hd)).Float32(float32(scale))
		attnDropArgs(a, p, seed, offset)
	})
}
