package tensor

import (
	"math"
	"os"
)

// EnvAttentionQKV set to "copy" makes FusedCausalAttentionQKV split and
// merge the heads with copies on every device, as the CPU does: the
// comparison for the in-place kernels (read at every call).
const EnvAttentionQKV = "STRATA_ATTENTION_QKV"

// attnRows is how the (bh, t, hd) heads of fused attention's operands lie
// in memory (kernels/attention_tc.cuh's attn_head): as (bh/nh, t, nh, hd),
// those of q, k, v, dq, dk and dv with rows rsi elements apart, those of
// out and dout with rows rso apart. Contiguous (bh, t, hd) is nh 1, rows
// hd apart; the heads of one (B, T, 3C) product are nh H, rsi 3C, and an
// output (B, T, C) is rso C.
type attnRows struct{ nh, rsi, rso int }

func contiguousRows(hd int) attnRows { return attnRows{nh: 1, rsi: hd, rso: hd} }

// fusedAttentionRows is implemented by backends whose fused attention
// reads and writes its operands in place in the layouts attnRows
// describes (q, k, v and their gradients pointing at head 0 of their
// group). attentionRowsFit says, before anything is allocated, whether
// their kernels take operands of dtype dt laid out so (false: the op
// copies to and from the contiguous layout instead), failing under op's
// name for operands no kernel takes; the other two methods return false
// in the same cases.
//
// tf32 (AttentionMode.TF32) lets float32 operands run on TF32 tensor
// cores.
type fusedAttentionRows interface {
	attentionRowsFit(op string, dt DType, t, hd int, rows attnRows, tf32 bool) bool
	attentionForwardRows(out, lse, q, k, v *Tensor, bh, t, hd int, rows attnRows, tf32 bool, scale, p float64, seed, offset uint64) bool
	attentionBackwardRows(dq, dk, dv, q, k, v, out, dout, lse *Tensor, bh, t, hd int, rows attnRows, tf32 bool, scale, p float64, seed, offset uint64) bool
}

// AttentionMode says how fused attention may compute. The zero value
// computes float32 inputs to float32 accuracy (on CUDA, heads up to 64
// wide in three TF32 products each, wider ones in float32 math).
type AttentionMode struct {
	// TF32 lets float32 q, k and v run on CUDA's TF32 tensor cores (head
	// sizes up to 64, in place on a (B, T, 3C) product): every product's
	// operands rounded to TF32's 10 mantissa bits, with float32
	// accumulation, softmax, lse and results, as MatMulMode.TF32 does for
	// matrix products. Half inputs and the CPU ignore it.
	TF32 bool
}

// FusedCausalAttentionQKV is FusedCausalAttention over the heads of one
// product qkv (B, T, 3C): q, k and v side by side along the last axis,
// each C = heads·hd wide with head h at columns [h·hd, (h+1)·hd), as a
// linear layer (GPT-2's c_attn) makes them. y (B, T, C) is the output
// with its heads side by side, the layout the next projection takes, and
// lse is (B, heads, T). The results are FusedCausalAttention's over the
// split heads, dropout mask included. On CUDA the tensor-core kernels
// (float16 and bfloat16, and float32 on TF32 tensor cores) read the heads
// in place and write y directly, so
// there are no head split and merge copies; elsewhere (the CPU, float32
// heads wider than 64, EnvAttention=simt, EnvAttentionQKV=copy) the op
// makes them.
func FusedCausalAttentionQKV(qkv *Tensor, heads int, p float64, seed, offset uint64) (y, lse *Tensor) {
	return FusedCausalAttentionQKVMode(qkv, heads, p, seed, offset, AttentionMode{})
}

// FusedCausalAttentionQKVMode is FusedCausalAttentionQKV computed as mode
// allows (AttentionMode.TF32: float32 qkv rounded to TF32 for its
// products; where those kernels do not run, as without it).
func FusedCausalAttentionQKVMode(qkv *Tensor, heads int, p float64, seed, offset uint64, mode AttentionMode) (y, lse *Tensor) {
	const op = "FusedCausalAttentionQKV"
	b, t, c, hd := qkvShape(op, qkv, heads, p)
	fa := attentionBackend(op, qkv)
	src, done := contig(qkv)
	defer done()
	ctx := ctxOf(op, qkv)
	acc := AccumDType(qkv.dtype)
	if fr, rows := inPlace(op, fa, qkv.dtype, b, t, c, heads, mode); fr != nil {
		y = mustNew(op, ctx, qkv.dev, acc, []int{b, t, c})
		defer releaseOnPanic(y)
		lse = mustNew(op, ctx, qkv.dev, acc, []int{b, heads, t})
		defer releaseOnPanic(lse)
		q, k, v := qkvPieces(src, c)
		defer releaseEach(q, k, v)
		if fr.attentionForwardRows(y, lse, q, k, v, b*heads, t, hd, rows, mode.TF32, 1/math.Sqrt(float64(hd)), p, seed, offset) {
			return y, lse
		}
		y.Release()
		lse.Release()
	}
	q, k, v := splitHeads(src, b, t, heads, hd)
	defer releaseEach(q, k, v)
	out, lse := FusedCausalAttention(q, k, v, p, seed, offset)
	defer releaseOnPanic(lse)
	defer out.Release()
	return mergeHeads(out, b, t, c), lse
}

// FusedCausalAttentionQKVBackward returns the gradient of qkv (B, T, 3C),
// in the accumulation dtype, from dy (B, T, C), given the forward's qkv,
// y and lse and its dropout (p, seed, offset). On CUDA the tensor-core
// kernels write dq, dk and dv into it in place.
func FusedCausalAttentionQKVBackward(qkv, y, lse, dy *Tensor, heads int, p float64, seed, offset uint64) (dqkv *Tensor) {
	return FusedCausalAttentionQKVBackwardMode(qkv, y, lse, dy, heads, p, seed, offset, AttentionMode{})
}

// FusedCausalAttentionQKVBackwardMode is FusedCausalAttentionQKVBackward
// computed as mode allows (see FusedCausalAttentionQKVMode).
func FusedCausalAttentionQKVBackwardMode(qkv, y, lse, dy *Tensor, heads int, p float64, seed, offset uint64, mode AttentionMode) (dqkv *Tensor) {
	const op = "FusedCausalAttentionQKVBackward"
	b, t, c, hd := qkvShape(op, qkv, heads, p)
	sameDevice(op, qkv, y, lse, dy)
	acc := AccumDType(qkv.dtype)
	for _, x := range []*Tensor{y, dy} {
		if x.dtype != acc || !shapeEq(x.shape, []int{b, t, c}) {
			fail(op, dtypeOrShape(x.dtype, acc), "y/dy %v %v for qkv %v %v: want %v [%d %d %d]", x.dtype, x.shape, qkv.dtype, qkv.shape, acc, b, t, c)
		}
	}
	if lse.dtype != acc || !shapeEq(lse.shape, []int{b, heads, t}) {
		fail(op, dtypeOrShape(lse.dtype, acc), "lse %v %v for qkv %v and %d heads: want %v [%d %d %d]", lse.dtype, lse.shape, qkv.shape, heads, acc, b, heads, t)
	}
	fa := attentionBackend(op, qkv)
	cs, done := contigAll(qkv, y, lse, dy)
	defer done()
	ctx := ctxOf(op, qkv, y, lse, dy)
	if fr, rows := inPlace(op, fa, qkv.dtype, b, t, c, heads, mode); fr != nil {
		dqkv = mustNew(op, ctx, qkv.dev, acc, []int{b, t, 3 * c})
		defer releaseOnPanic(dqkv)
		q, k, v := qkvPieces(cs[0], c)
		defer releaseEach(q, k, v)
		dq, dk, dv := qkvPieces(dqkv, c)
		defer releaseEach(dq, dk, dv)
		if fr.attentionBackwardRows(dq, dk, dv, q, k, v, cs[1], cs[3], cs[2], b*heads, t, hd, rows, mode.TF32, 1/math.Sqrt(float64(hd)), p, seed, offset) {
			return dqkv
		}
		dqkv.Release()
	}
	q, k, v := splitHeads(cs[0], b, t, heads, hd)
	defer releaseEach(q, k, v)
	out := splitOutput(cs[1], b, t, heads, hd)
	defer out.Release()
	dout := splitOutput(cs[3], b, t, heads, hd)
	defer dout.Release()
	dq, dk, dv := FusedCausalAttentionBackward(q, k, v, out, cs[2], dout, p, seed, offset)
	defer releaseEach(dq, dk, dv)
	dqkv = mustNew(op, ctx, qkv.dev, acc, []int{b, t, 3 * c})
	defer releaseOnPanic(dqkv)
	d5 := dqkv.Reshape(b, t, 3, heads, hd)
	defer d5.Release()
	for i, g := range []*Tensor{dq, dk, dv} {
		gp := g.Permute(0, 2, 1, 3)
		gt := gp.Unsqueeze(2) // (B, T, 1, H, hd), a view
		func() {
			defer releaseEach(gp, gt) // also when the copy fails
			d5.WriteNarrow(2, i, gt)
		}()
	}
	return dqkv
}

// inPlace returns the backend's in-place kernels and the layout of the
// heads of a (B, T, 3C) product of dtype dt and of its (B, T, C) output,
// or nil when the op makes the split and merge copies instead: a backend
// without such kernels, an empty product, EnvAttentionQKV=copy, or
// operands its kernels (as mode allows) do not take so.
func inPlace(op string, fa fusedAttention, dt DType, b, t, c, heads int, mode AttentionMode) (fusedAttentionRows, attnRows) {
	rows := attnRows{nh: heads, rsi: 3 * c, rso: c}
	fr, ok := fa.(fusedAttentionRows)
	if !ok || b*t*c == 0 || os.Getenv(EnvAttentionQKV) == "copy" || !fr.attentionRowsFit(op, dt, t, c/heads, rows, mode.TF32) {
		return nil, rows
	}
	return fr, rows
}

// qkvShape checks the operand of the QKV ops (a head size of 0 refused,
// as attentionShape refuses it) and returns B, T, C and the head size.
func qkvShape(op string, qkv *Tensor, heads int, p float64) (b, t, c, hd int) {
	qkv.live(op)
	sameFloat(op, qkv)
	// 3C % 3 and C % heads, not 3C % (3*heads): that product can wrap
	// around for an absurd head count.
	if qkv.Rank() != 3 || heads <= 0 || qkv.shape[2]%3 != 0 || qkv.shape[2]/3%heads != 0 {
		fail(op, ErrShape, "qkv %v with %d heads: want (B, T, 3C), C a multiple of the heads", qkv.shape, heads)
	}
	if qkv.shape[2] == 0 {
		fail(op, ErrShape, "qkv %v with %d heads has head dimension 0: want C >= heads", qkv.shape, heads)
	}
	if p < 0 || p >= 1 || math.IsNaN(p) {
		fail(op, ErrArgument, "dropout probability %v not in [0, 1)", p)
	}
	c = qkv.shape[2] / 3
	return qkv.shape[0], qkv.shape[1], c, c / heads
}

// qkvPieces returns the three C-wide groups of the contiguous (B, T, 3C)
// x as views: each starts at its group's first head.
func qkvPieces(x *Tensor, c int) (q, k, v *Tensor) {
	return x.Narrow(2, 0, c), x.Narrow(2, c, c), x.Narrow(2, 2*c, c)
}

// splitHeads copies the q, k and v heads of the contiguous (B, T, 3C) x
// into contiguous (B, H, T, hd) tensors.
func splitHeads(x *Tensor, b, t, heads, hd int) (q, k, v *Tensor) {
	x5 := x.Reshape(b, t, 3, heads, hd)
	defer x5.Release()
	var out [3]*Tensor
	defer func() { // a copy that fails (out of memory) releases those made before it
		if r := recover(); r != nil {
			releaseEach(out[:]...)
			panic(r)
		}
	}()
	for i := range out {
		n := x5.Narrow(2, i, 1)
		piece := n.Permute(2, 0, 3, 1, 4) // (1, B, H, T, hd)
		func() {
			defer releaseEach(n, piece)
			out[i] = piece.Reshape(b, heads, t, hd)
		}()
	}
	return out[0], out[1], out[2]
}

// splitOutput copies y (B, T, C) into a contiguous (B, H, T, hd) tensor.
func splitOutput(y *Tensor, b, t, heads, hd int) *Tensor {
	r := y.Reshape(b, t, heads, hd)
	defer r.Release()
	p := r.Permute(0, 2, 1, 3)
	defer p.Release()
	return p.Contiguous()
}

// mergeHeads copies out (B, H, T, hd) into a contiguous (B, T, C) tensor.
func mergeHeads(out *Tensor, b, t, c int) *Tensor {
	p := out.Permute(0, 2, 1, 3)
	defer p.Release()
	return p.Reshape(b, t, c)
}

// releaseEach releases the op's temporaries.
func releaseEach(ts ...*Tensor) {
	for _, t := range ts {
		t.Release()
	}
}
