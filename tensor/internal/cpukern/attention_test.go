package cpukern

import (
	"math"
	"testing"
)

// naiveAttention is the float64 reference: the (bh, t, t) probabilities,
// dropout by DropoutMask as Dropout draws it, and the gradients by the
// chain rule through softmax, dropout and the two products.
func naiveAttention(q, k, v, dout []float64, bh, t, hd int, p float64, seed, offset uint64) (out, lse, dq, dk, dv []float64) {
	n := bh * t * hd
	out, lse, dq, dk, dv = make([]float64, n), make([]float64, bh*t), make([]float64, n), make([]float64, n), make([]float64, n)
	scale := 1 / math.Sqrt(float64(hd))
	thr := dropoutThreshold(p)
	row := func(x []float64, h, r int) []float64 { return x[(h*t+r)*hd : (h*t+r+1)*hd] }
	for h := range bh {
		for i := range t {
			P, M, dP := make([]float64, i+1), make([]float64, i+1), make([]float64, i+1)
			mx := math.Inf(-1)
			for j := range P {
				for d := range hd {
					P[j] += row(q, h, i)[d] * row(k, h, j)[d]
				}
				P[j] *= scale
				mx = max(mx, P[j])
			}
			var sum float64
			for j := range P {
				P[j] = math.Exp(P[j] - mx)
				sum += P[j]
			}
			lse[h*t+i] = mx + math.Log(sum)
			var delta float64
			for j := range P {
				P[j] /= sum
				M[j] = 1
				if p > 0 {
					M[j] = 0
					if uint64(DropoutMask(seed, offset, (h*t+i)*t+j)) >= thr {
						M[j] = 1 / (1 - p)
					}
				}
				for d := range hd {
					row(out, h, i)[d] += P[j] * M[j] * row(v, h, j)[d]
					dP[j] += row(dout, h, i)[d] * row(v, h, j)[d]
				}
				dP[j] *= M[j]
				delta += dP[j] * P[j]
			}
			for j := range P {
				ds := P[j] * (dP[j] - delta)
				for d := range hd {
					row(dq, h, i)[d] += scale * ds * row(k, h, j)[d]
					row(dk, h, j)[d] += scale * ds * row(q, h, i)[d]
					row(dv, h, j)[d] += P[j] * M[j] * row(dout, h, i)[d]
				}
			}
		}
	}
	return out, lse, dq, dk, dv
}

func TestAttentionAgainstFloat64Reference(t *testing.T) {
	for _, c := range []struct {
		bh, t, hd int
		p         float64
	}{{1, 1, 4, 0}, {2, 33, 8, 0}, {3, 70, 16, 0.2}, {2, 65, 5, 0.5}} {
		rng := newRNG(uint64(c.t))
		n := c.bh * c.t * c.hd
		q, k, v, g := randSlice[float64](rng, n, -2, 2), randSlice[float64](rng, n, -2, 2), randSlice[float64](rng, n, -2, 2), randSlice[float64](rng, n, -1, 1)
		const seed, offset = 99, 1001
		out, lse, dq, dk, dv := naiveAttention(q, k, v, g, c.bh, c.t, c.hd, c.p, seed, offset)
		check := func(name string, got32 []float32, got64, want []float64) {
			t.Helper()
			requireClose(t, name+"/float64", got64, want, 1e-12, 1e-12)
			requireClose(t, name+"/float32", got32, want, 1e-5, 1e-5)
		}
		f32s := func(x []float64) []float32 {
			s := make([]float32, len(x))
			for i, v := range x {
				s[i] = float32(v)
			}
			return s
		}
		o64, l64 := make([]float64, n), make([]float64, c.bh*c.t)
		o32, l32 := make([]float32, n), make([]float32, c.bh*c.t)
		AttentionForward(o64, l64, q, k, v, c.bh, c.t, c.hd, 1/math.Sqrt(float64(c.hd)), c.p, seed, offset)
		q32, k32, v32, g32 := f32s(q), f32s(k), f32s(v), f32s(g)
		AttentionForward(o32, l32, q32, k32, v32, c.bh, c.t, c.hd, 1/math.Sqrt(float64(c.hd)), c.p, seed, offset)
		check("out", o32, o64, out)
		check("lse", l32, l64, lse)
		gq64, gk64, gv64 := make([]float64, n), make([]float64, n), make([]float64, n)
		gq32, gk32, gv32 := make([]float32, n), make([]float32, n), make([]float32, n)
		AttentionBackward(gq64, gk64, gv64, q, k, v, o64, g, l64, c.bh, c.t, c.hd, 1/math.Sqrt(float64(c.hd)), c.p, seed, offset)
		AttentionBackward(gq32, gk32, gv32, q32, k32, v32, o32, g32, l32, c.bh, c.t, c.hd, 1/math.Sqrt(float64(c.hd)), c.p, seed, offset)
		check("dq", gq32, gq64, dq)
		check("dk", gk32, gk64, dk)
		check("dv", gv32, gv64, dv)
	}
}

// TestAttentionFirstTileAllNegInf: a row whose scores in its first key
// tile are all -Inf (here q·k overflows) but finite in a later one is the
// softmax of the finite scores, as the plain path and the CUDA kernel
// give it; the online softmax must not take exp(-Inf - -Inf) = NaN as the
// rescale of the first tile.
func TestAttentionFirstTileAllNegInf(t *testing.T) {
	t.Run("float32", func(t *testing.T) { testAttentionFirstTileAllNegInf[float32](t, 1e20) })
	t.Run("float64", func(t *testing.T) { testAttentionFirstTileAllNegInf[float64](t, 1e200) })
}

func testAttentionFirstTileAllNegInf[T Float](t *testing.T, big float64) {
	const n = attnTile + 8 // one row hd = 1: keys 0..attnTile-1 score -Inf
	q, k, v := make([]T, n), make([]T, n), make([]T, n)
	for c := range n {
		q[c], v[c] = T(big), T(c)
		k[c] = T(-big) // q·k = -big² overflows to -Inf
		if c >= attnTile {
			k[c] = T(float64(c-attnTile) / big) // scores 0, 1, 2, ...
		}
	}
	out, lse := make([]T, n), make([]T, n)
	AttentionForward(out, lse, q, k, v, 1, n, 1, 1, 0, 0, 0)
	for r := attnTile; r < n; r++ {
		var sum, acc float64
		for c := attnTile; c <= r; c++ {
			e := math.Exp(float64(c - r))
			sum += e
			acc += e * float64(c)
		}
		requireClose(t, "out", out[r:r+1], []float64{acc / sum}, 1e-6, 0)
		requireClose(t, "lse", lse[r:r+1], []float64{float64(r-attnTile) + math.Log(sum)}, 1e-6, 0)
	}
}
