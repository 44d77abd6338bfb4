package tensor

import (
	"fmt"
	"math"
	"os"
	"strconv"

	"github.com/strata-ml/strata/cuda"
)

// Fused attention on the GPU: kernels/attention.cuh, one kernel per input
// dtype (float32, float16, bfloat16), head size HD (16, 32, 64, 128; hd is
// rounded up and padded with zeros) and pass: forward, backward_dq (which
// also writes delta = rowsum(dout * out)) and backward_dkdv. Three
// launches in all for a forward and backward pass, none of them atomic.
// Float16 and bfloat16 inputs run the tensor-core kernels of
// kernels/attention_mma3.cuh (mma.sync with ldmatrix and cp.async,
// sm_80+): without dropout (p == 0) the mma3 ones, compiled without the
// Philox code and so with larger tiles and more blocks an SM, with it the
// mma3drop ones. Float32 inputs with hd at most 64 run the same
// tensor-core kernels compiled for float32 on TF32 mma (attention_tf32.cuh):
// where the caller allows TF32 (AttentionMode.TF32) the tf32 ones
// (operands rounded to TF32, float32 accumulation and softmax), else the
// tf32x3 ones (each product in three TF32 products: float32-accurate);
// wider heads run the float32-math kernels. EnvAttention=simt selects the
// float32-math ones for every dtype. The
// tensor-core backward_dq also rounds dout to the input type into scratch
// (doh) for backward_dkdv. The tensor-core kernels take their operands'
// layout (attnRows: heads to a token, row strides), so
// FusedCausalAttentionQKV runs them on the heads of a (B, T, 3C) product
// in place; the float32-math ones read contiguous heads only.

// EnvAttention selects the kernels of fused attention: "simt" the
// float32-math ones for every dtype (for comparisons and as a fallback),
// anything else (unset included) the tensor-core ones for float16 and
// bfloat16, and for float32 where TF32 is allowed; it is read at every
// call.
const EnvAttention = "STRATA_ATTENTION"

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
// simt[pass][dtype][head size], mma3[drop][pass][dtype-1][head size]
// (the tensor-core kernels, float16 and bfloat16, without and with
// dropout) and tf32[x3][drop][pass][head size] (float32 on TF32 tensor
// cores, head sizes 16, 32 and 64: rounded to TF32, x3 0, or in three
// TF32 products, x3 1).
type attentionKernels struct {
	simt [3][3][4]*cuda.Function
	mma3 [2][3][2][4]*cuda.Function
	tf32 [2][2][3][3]*cuda.Function
	// warps holds each loaded tensor-core kernel's launch bound in warps
	// (readBlocks): the block a launch must use. A fatbin named by
	// EnvKernels may be built with other tiles than the embedded one's,
	// which attnMMA3Warps and attnTF32Warps describe (the fake device of
	// the tests has no driver to ask, and uses them).
	warps map[*cuda.Function]int
}

// readBlocks asks the driver for every tensor-core kernel's launch bound
// (cuFuncGetAttribute, MAX_THREADS_PER_BLOCK: the __launch_bounds__ the
// kernel was compiled with), so that launches use the loaded kernel's
// block whatever sources the fatbin came from.
func (k *attentionKernels) readBlocks() error {
	k.warps = map[*cuda.Function]int{}
	return k.eachTensorCore(func(fn *cuda.Function, _ int) error {
		n, err := fn.Attribute(cuda.FuncMaxThreadsPerBlock)
		if err != nil {
			return err
		}
		if n < 32 || n%32 != 0 {
			return fmt.Errorf("attention kernel %s: a launch bound of %d threads is not whole warps", fn.Name(), n)
		}
		k.warps[fn] = n / 32
		return nil
	})
}

// eachTensorCore calls f with every tensor-core kernel (mma3 and tf32)
// and its block in warps as the embedded fatbin's tables say, until f
// fails.
func (k *attentionKernels) eachTensorCore(f func(fn *cuda.Function, w int) error) error {
	for dr := range attnMMA3Name {
		for p := range attnPassName {
			for i := range attnDTypes[1:] {
				for j, w := range attnMMA3Warps[dr][p] {
					if err := f(k.mma3[dr][p][i][j], w); err != nil {
						return err
					}
				}
			}
			for x3 := range attnTF32Name {
				for j, w := range attnTF32Warps[x3][dr][p] {
					if err := f(k.tf32[x3][dr][p][j], w); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// warpsOf is fn's block in warps: its launch bound where the driver told
// it, else the embedded fatbin's table value w.
func (k *attentionKernels) warpsOf(fn *cuda.Function, w int) int {
	if n, ok := k.warps[fn]; ok {
		return n
	}
	return w
}

// Launch shapes: 256 threads for the float32-math kernels; for mma3,
// warps of 16 rows per pass and head size, as Attn3Fwd, Attn3Dq and
// Attn3Dkv of kernels/attention_mma3.cuh say.
var (
	// attnMMA3Warps[drop][pass][head size]: Attn3Fwd, Attn3Dq and
	// Attn3Dkv's W without dropout (mma3) and with it (mma3drop).
	attnMMA3Warps = [2][3][4]int{
		{{8, 8, 8, 4}, {8, 8, 8, 4}, {8, 8, 8, 2}},
		{{4, 4, 4, 8}, {4, 4, 4, 8}, {4, 4, 4, 2}},
	}
	attnMMA3Name = [2]string{"mma3", "mma3drop"}
	// attnTF32Warps[x3][drop][pass][head size 16, 32, 64]: the W of the
	// float32 tables, tf32 (Attn3FwdTab<1> and co.) and tf32x3 (<2>).
	attnTF32Warps = [2][2][3][3]int{
		{{{8, 8, 8}, {8, 8, 4}, {8, 8, 4}}, {{4, 4, 4}, {4, 4, 4}, {4, 4, 4}}},
		{{{8, 8, 8}, {8, 8, 2}, {8, 8, 2}}, {{4, 4, 4}, {4, 4, 4}, {4, 4, 4}}},
	}
)

// The kernels attnKind picks (EnvAttention, AttentionMode).
const (
	attnSIMT = iota
	attnMMA3
	attnTF32
	attnTF32x3
)

// attnTF32Name is the kernels' type suffix of attnTF32 and attnTF32x3.
var attnTF32Name = [2]string{"tf32", "tf32x3"}

// attnKind returns the kernels that dtype index di and head index hi run,
// tf32 saying whether float32 inputs may be rounded to TF32.
func attnKind(di, hi int, tf32 bool) int {
	switch {
	case os.Getenv(EnvAttention) == "simt":
		return attnSIMT
	case di > 0:
		return attnMMA3
	case hi >= len(attnTF32Warps[0][0][0]):
		return attnSIMT
	case tf32:
		return attnTF32
	}
	return attnTF32x3
}

// bind adds the kernels' names to a bindings table.
func (k *attentionKernels) bind(m map[string]**cuda.Function) {
	for p, pass := range attnPassName {
		for i, dt := range attnDTypes {
			for j, hd := range attnHeads {
				sfx := castSuffix[dt] + "_h" + strconv.Itoa(hd)
				m["attention_"+pass+"_"+sfx] = &k.simt[p][i][j]
				for dr, name := range attnMMA3Name {
					switch {
					case i > 0:
						m["attention_"+pass+"_"+name+"_"+sfx] = &k.mma3[dr][p][i-1][j]
					case j < len(attnTF32Warps[0][dr][p]):
						for x3, tn := range attnTF32Name {
							m["attention_"+pass+"_"+name+"_"+tn+"_h"+strconv.Itoa(hd)] = &k.tf32[x3][dr][p][j]
						}
					}
				}
			}
		}
	}
}

// kernel returns pass p's kernel of kind (attnKind) for dtype index di
// and head index hi, its grid and block; drop (dropout probability above
// 0) picks mma3's dropout variant. rows is the float32-math kernel's rows
// a block.
func (k *attentionKernels) kernel(op string, kind, p, di, hi, bh, t int, drop bool, rows [4]int) (*cuda.Function, [3]uint32, [3]uint32) {
	dr := 0
	if drop {
		dr = 1
	}
	switch kind {
	case attnMMA3:
		fn := k.mma3[dr][p][di-1][hi]
		w := k.warpsOf(fn, attnMMA3Warps[dr][p][hi])
		return fn, attnGrid(op, bh, t, 16*w), [3]uint32{uint32(32 * w), 1, 1}
	case attnTF32, attnTF32x3:
		fn := k.tf32[kind-attnTF32][dr][p][hi]
		w := k.warpsOf(fn, attnTF32Warps[kind-attnTF32][dr][p][hi])
		return fn, attnGrid(op, bh, t, 16*w), [3]uint32{uint32(32 * w), 1, 1}
	}
	return k.simt[p][di][hi], attnGrid(op, bh, t, rows[hi]), attnThreads
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
	if !b.attentionForwardRows(out, lse, q, k, v, bh, t, hd, contiguousRows(hd), false, scale, p, seed, offset) {
		fail("FusedCausalAttention", ErrShape, "%d rows of %d: a head exceeds the kernels' 32-bit row indices", t, hd)
	}
}

func (b cudaBackend) attentionBackward(dq, dk, dv, q, k, v, out, dout, lse *Tensor, bh, t, hd int, scale, p float64, seed, offset uint64) {
	if !b.attentionBackwardRows(dq, dk, dv, q, k, v, out, dout, lse, bh, t, hd, contiguousRows(hd), false, scale, p, seed, offset) {
		fail("FusedCausalAttentionBackward", ErrShape, "%d rows of %d: a head exceeds the kernels' 32-bit row indices", t, hd)
	}
}

// attentionRowsFit reports whether the kernels for dt and hd (tf32: float32
// may run on TF32 tensor cores) take operands laid out as rows says
// (fusedAttentionRows), failing under op's name for a dtype or head size
// no kernel takes.
func (b cudaBackend) attentionRowsFit(op string, dt DType, t, hd int, rows attnRows, tf32 bool) bool {
	di, hi := attentionVariant(op, dt, hd)
	return rowsFit(attnKind(di, hi, tf32), rows, t, hd)
}

// rowsFit reports whether the kernels of a kind (attnKind) can take
// operands laid out as rows says: the float32-math ones read contiguous
// (bh, t, hd) only, and the tensor-core ones index a head's rows in 32
// bits.
func rowsFit(kind int, rows attnRows, t, hd int) bool {
	if kind == attnSIMT {
		return rows == contiguousRows(hd)
	}
	return int64(t)*int64(max(rows.rsi, rows.rso)) < 1<<31
}

func (b cudaBackend) attentionForwardRows(out, lse, q, k, v *Tensor, bh, t, hd int, rows attnRows, tf32 bool, scale, p float64, seed, offset uint64) bool {
	const op = "FusedCausalAttention"
	d := b.d
	d.refuseDropout(op, p)
	di, hi := attentionVariant(op, q.dtype, hd)
	kind := attnKind(di, hi, tf32)
	if !rowsFit(kind, rows, t, hd) {
		return false
	}
	fn, grid, block := d.k.attention.kernel(op, kind, 0, di, hi, bh, t, p > 0, attnFwdRows)
	d.launch(op, fn, grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(out)).Ptr(devPtr(lse)).Ptr(devPtr(q)).Ptr(devPtr(k)).Ptr(devPtr(v))
		a.Int64(int64(bh)).Int64(int64(t)).Int32(int32(hd))
		if kind != attnSIMT {
			a.Int32(int32(rows.nh)).Int32(int32(rows.rsi)).Int32(int32(rows.rso))
		}
		a.Float32(float32(scale))
		attnDropArgs(a, p, seed, offset)
	})
	return true
}

// attentionBackwardRows runs backward_dq, which writes delta into
// scratch, then backward_dkdv, which reads it (the stream orders them).
// The tensor-core backward_dq also writes dout in q's dtype (doh,
// contiguous, before delta in the scratch) for backward_dkdv.
func (b cudaBackend) attentionBackwardRows(dq, dk, dv, q, k, v, out, dout, lse *Tensor, bh, t, hd int, rows attnRows, tf32 bool, scale, p float64, seed, offset uint64) bool {
	const op = "FusedCausalAttentionBackward"
	d := b.d
	d.refuseDropout(op, p)
	di, hi := attentionVariant(op, q.dtype, hd)
	kind := attnKind(di, hi, tf32)
	if !rowsFit(kind, rows, t, hd) {
		return false
	}
	dohBytes, withDoh := 0, kind != attnSIMT
	if withDoh {
		dohBytes = (bh*t*hd*q.dtype.Size() + 15) &^ 15
	}
	scratch := d.scratch(op, ceilDiv(dohBytes+4*bh*t, 8)) // doh, then bh*t float32 delta
	defer freeScratch(scratch)
	doh := scratchPtr(scratch)
	delta := doh + cuda.DevicePtr(dohBytes)
	fn, grid, block := d.k.attention.kernel(op, kind, 1, di, hi, bh, t, p > 0, attnDqRows)
	d.launch(op, fn, grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(dq)).Ptr(delta)
		if withDoh {
			a.Ptr(doh)
		}
		a.Ptr(devPtr(q)).Ptr(devPtr(k)).Ptr(devPtr(v))
		a.Ptr(devPtr(out)).Ptr(devPtr(dout)).Ptr(devPtr(lse))
		a.Int64(int64(bh)).Int64(int64(t)).Int32(int32(hd))
		if withDoh {
			a.Int32(int32(rows.nh)).Int32(int32(rows.rsi)).Int32(int32(rows.rso))
		}
		a.Float32(float32(scale))
		attnDropArgs(a, p, seed, offset)
	})
	fn, grid, block = d.k.attention.kernel(op, kind, 2, di, hi, bh, t, p > 0, attnDkvRows)
	d.launch(op, fn, grid, block, func(a *cuda.Args) {
		a.Ptr(devPtr(dk)).Ptr(devPtr(dv)).Ptr(devPtr(q)).Ptr(devPtr(k)).Ptr(devPtr(v))
		if withDoh {
			a.Ptr(doh)
		} else {
			a.Ptr(devPtr(dout))
		}
		a.Ptr(devPtr(lse)).Ptr(delta)
		a.Int64(int64(bh)).Int64(int64(t)).Int32(int32(hd))
		if withDoh {
			a.Int32(int32(rows.nh)).Int32(int32(rows.rsi))
		}
		a.Float32(float32(scale))
		attnDropArgs(a, p, seed, offset)
	})
	return true
}
