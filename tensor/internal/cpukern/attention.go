package cpukern

import (
	"fmt"
	"math"
)

// Fused causal attention (FlashAttention-2) over bh heads of t rows of
// width hd, laid out (bh, t, hd) contiguously. The forward pass walks the
// keys in tiles of attnTile with the online softmax: each query row keeps
// its running maximum m, its running sum l of exp(s - m) and its output
// accumulator, rescaled by exp(m_old - m_new) whenever the maximum
// grows; at the end out = acc / l and lse = m + log l. The (t, t)
// probabilities never exist. The backward pass recomputes them from q, k
// and lse, one element at a time:
//
//	p = exp(scale q·k - lse), dp = dout·v (dropout: masked and scaled),
//	ds = p (dp - delta), delta = rowsum(dout * out),
//	dq = scale Σ ds k,  dk = scale Σ ds q,  dv = Σ p_dropped dout
//
// in two passes that write disjoint rows, so they run in parallel without
// atomics and give the same bits at any worker count: one over query
// tiles (dq), one over key tiles (dk, dv). The CUDA kernels
// (kernels/attention.cuh) are the same algorithm.
//
// Dropout acts on the probabilities: element (h, i, j) of the (bh, t, t)
// matrix the plain path would hold is kept iff DropoutMask(seed, offset,
// (h*t+i)*t+j) >= ceil(p 2^32), exactly as Dropout draws it, and kept
// probabilities are scaled by 1/(1-p).
const attnTile = 32

// attnDrop is the dropout of one call: its threshold and scale.
type attnDrop[T Float] struct {
	on        bool
	thr       uint64
	scale     T
	seed, off uint64
	t         int
}

func newAttnDrop[T Float](p float64, seed, offset uint64, t int) attnDrop[T] {
	if p == 0 {
		return attnDrop[T]{scale: 1}
	}
	return attnDrop[T]{on: true, thr: dropoutThreshold(p), scale: T(1 / (1 - p)), seed: seed, off: offset, t: t}
}

// apply returns x dropped or scaled as element (row, col) of head h's
// matrix.
func (d *attnDrop[T]) apply(x T, h, row, col int) T {
	if !d.on {
		return x
	}
	if uint64(DropoutMask(d.seed, d.off, (h*d.t+row)*d.t+col)) < d.thr {
		return x * 0 // as Dropout: a NaN stays NaN
	}
	return x * d.scale
}

func checkAttention(kernel string, bh, t, hd int, p float64, lens ...int) {
	if bh < 0 || t < 0 || hd < 0 {
		panic(fmt.Sprintf("cpukern.%s: bh %d, t %d, hd %d", kernel, bh, t, hd))
	}
	if !(p >= 0 && p < 1) {
		panic(fmt.Sprintf("cpukern.%s: p = %v, want a probability in [0, 1)", kernel, p))
	}
	n := bh * t * hd
	for i, l := range lens {
		want := n
		if i == 1 { // lse
			want = bh * t
		}
		mustEq(kernel, fmt.Sprintf("operand %d", i), l, want)
	}
}

func dotT[T Float](a, b []T) T {
	b = b[:len(a)]
	var s T
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

func axpyT[T Float](y []T, a T, x []T) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

// AttentionForward computes out = dropout(softmax(causal(scale q kᵀ))) v
// and lse, the log-sum-exp of each row's kept scaled scores (before
// dropout), for backward. out, q, k, v have bh*t*hd elements, lse bh*t.
func AttentionForward[T Float](out, lse, q, k, v []T, bh, t, hd int, scale, p float64, seed, offset uint64) {
	checkAttention("AttentionForward", bh, t, hd, p, len(out), len(lse), len(q), len(k), len(v))
	nq := (t + attnTile - 1) / attnTile
	drop := newAttnDrop[T](p, seed, offset, t)
	sc := T(scale)
	ParallelFor(bh*nq, 1, func(lo, hi int) {
		s := make([]T, attnTile)
		acc := make([]T, attnTile*hd)
		m, l := make([]T, attnTile), make([]T, attnTile)
		for tile := lo; tile < hi; tile++ {
			h, r0 := tile/nq, (tile%nq)*attnTile
			r1 := min(r0+attnTile, t)
			clear(acc)
			for i := range m {
				m[i], l[i] = T(math.Inf(-1)), 0
			}
			for c0 := 0; c0 < r1; c0 += attnTile { // key tiles up to the diagonal
				c1 := min(c0+attnTile, r1)
				for r := r0; r < r1; r++ {
					cmax := min(c1, r+1) // causal: keys c <= r
					if cmax <= c0 {
						continue
					}
					i := r - r0
					qr := q[(h*t+r)*hd : (h*t+r+1)*hd]
					mt := m[i]
					for c := c0; c < cmax; c++ {
						x := sc * dotT(qr, k[(h*t+c)*hd:(h*t+c+1)*hd])
						s[c-c0] = x
						mt = max(mt, x)
					}
					// Scores of -Inf so far (the tile's q·k overflowed) weigh
					// nothing: shift by 0, not by -Inf, whose exp(-Inf - -Inf)
					// would make the row NaN though later keys are finite
					// (the CUDA kernel does the same).
					shift := mt
					if math.IsInf(float64(mt), -1) {
						shift = 0
					}
					alpha := expT(m[i] - shift) // 0 on the first tile (m = -Inf)
					ar := acc[i*hd : (i+1)*hd]
					if alpha != 1 {
						for d := range ar {
							ar[d] *= alpha
						}
					}
					var sum T
					for c := c0; c < cmax; c++ {
						e := expT(s[c-c0] - shift)
						sum += e
						// Also a zero weight (dropped, or exp underflowed):
						// 0 x a NaN or infinity of v is NaN, as a matrix
						// product of the probabilities and v gives it.
						axpyT(ar, drop.apply(e, h, r, c), v[(h*t+c)*hd:(h*t+c+1)*hd])
					}
					l[i] = l[i]*alpha + sum
					m[i] = mt
				}
			}
			for r := r0; r < r1; r++ {
				i := r - r0
				inv := 1 / l[i]
				o := out[(h*t+r)*hd : (h*t+r+1)*hd]
				for d, a := range acc[i*hd : (i+1)*hd] {
					o[d] = a * inv
				}
				lse[h*t+r] = m[i] + T(math.Log(float64(l[i])))
			}
		}
	})
}

// AttentionBackward computes dq, dk and dv of AttentionForward from the
// output gradient dout, the forward's out and lse, and q, k, v (all bh*t*hd
// elements but lse, bh*t), overwriting dq, dk and dv.
func AttentionBackward[T Float](dq, dk, dv, q, k, v, out, dout, lse []T, bh, t, hd int, scale, p float64, seed, offset uint64) {
	checkAttention("AttentionBackward", bh, t, hd, p, len(dq), len(lse), len(dk), len(dv), len(q), len(k), len(v), len(out), len(dout))
	drop := newAttnDrop[T](p, seed, offset, t)
	sc := T(scale)
	delta := make([]T, bh*t) // rowsum(dout * out) = rowsum(dp_dropped * p)
	for r := range delta {
		delta[r] = dotT(dout[r*hd:(r+1)*hd], out[r*hd:(r+1)*hd])
	}
	row := func(x []T, h, r int) []T { return x[(h*t+r)*hd : (h*t+r+1)*hd] }
	// grad returns p and ds of element (h, r, c) and p after dropout.
	grad := func(h, r, c int) (pd, ds T) {
		pr := expT(sc*dotT(row(q, h, r), row(k, h, c)) - lse[h*t+r])
		dp := drop.apply(dotT(row(dout, h, r), row(v, h, c)), h, r, c)
		return drop.apply(pr, h, r, c), pr * (dp - delta[h*t+r])
	}
	nt := (t + attnTile - 1) / attnTile
	ParallelFor(bh*nt, 1, func(lo, hi int) { // dq over query tiles
		for tile := lo; tile < hi; tile++ {
			h, r0 := tile/nt, (tile%nt)*attnTile
			for r := r0; r < min(r0+attnTile, t); r++ {
				g := row(dq, h, r)
				clear(g)
				for c := 0; c <= r; c++ {
					_, ds := grad(h, r, c)
					axpyT(g, sc*ds, row(k, h, c))
				}
			}
		}
	})
	ParallelFor(bh*nt, 1, func(lo, hi int) { // dk, dv over key tiles
		for tile := lo; tile < hi; tile++ {
			h, c0 := tile/nt, (tile%nt)*attnTile
			for c := c0; c < min(c0+attnTile, t); c++ {
				gk, gv := row(dk, h, c), row(dv, h, c)
				clear(gk)
				clear(gv)
				for r := c; r < t; r++ {
					pd, ds := grad(h, r, c)
					axpyT(gv, pd, row(dout, h, r))
					axpyT(gk, sc*ds, row(q, h, r))
				}
			}
		}
	})
}
