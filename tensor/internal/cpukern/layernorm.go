package cpukern

import (
	"fmt"
	"math"
)

// lnChunk is the number of elements per chunk of LayerNormBackward's
// deterministic dw/db reduction.
const lnChunk = 1 << 16

// LayerNorm normalises each row of x (rows, cols) over its cols elements:
// y = (x - mean) * rstd * w + b with rstd = 1/sqrt(var + eps) and var the
// biased (divide by cols) variance, as torch.nn.LayerNorm. w and b have
// cols elements and either may be nil (no scale, no shift). mean and rstd
// receive one value per row for the backward pass. Statistics are taken in
// float64 in two passes (mean, then squared deviations), and the mean is
// subtracted as its rounding to T and the rest (x - m is exact near m,
// then the rest goes), so a large mean costs no accuracy: PyTorch's
// float32 kernel loses the mean's rounding error in every output (rows
// of 10000 + 0.001k: off by 0.146 where this is off by 1e-7). y may be x
// itself. It panics on mismatched lengths.
func LayerNorm[T Float](y, mean, rstd, x, w, b []T, rows, cols int, eps float64) {
	checkRows("LayerNorm", rows, cols, len(y), len(x))
	mustEq("LayerNorm", "mean", len(mean), rows)
	mustEq("LayerNorm", "rstd", len(rstd), rows)
	if w != nil {
		mustEq("LayerNorm", "w", len(w), cols)
	}
	if b != nil {
		mustEq("LayerNorm", "b", len(b), cols)
	}
	if cols == 0 {
		panic(fmt.Sprintf("cpukern.LayerNorm: cols is 0 (rows %d)", rows))
	}
	if serial(rows*cols, grainRow) {
		layerNormRows(y, mean, rstd, x, w, b, cols, eps, 0, rows)
		return
	}
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) { layerNormRows(y, mean, rstd, x, w, b, cols, eps, lo, hi) })
}

func layerNormRows[T Float](y, mean, rstd, x, w, b []T, cols int, eps float64, lo, hi int) {
	for r := lo; r < hi; r++ {
		xr, yr := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
		mu := sumRow(xr) / float64(cols)
		if !isF32[T]() { // float32 values sum exactly enough in float64
			mu += sumDev(f64(xr), mu) / float64(cols)
		}
		v := sumSqDev(xr, mu) / float64(cols)
		rs := 1 / math.Sqrt(v+eps)
		mean[r], rstd[r] = T(mu), T(rs)
		m, s := T(mu), T(rs)
		ml := T(mu - float64(m)) // the mean's rounding error
		xr = xr[:len(yr)]
		switch {
		case w != nil && b != nil:
			w, b := w[:len(yr)], b[:len(yr)]
			for i, v := range xr {
				yr[i] = ((v-m)-ml)*s*w[i] + b[i]
			}
		case w != nil:
			w := w[:len(yr)]
			for i, v := range xr {
				yr[i] = ((v - m) - ml) * s * w[i]
			}
		case b != nil:
			b := b[:len(yr)]
			for i, v := range xr {
				yr[i] = ((v-m)-ml)*s + b[i]
			}
		default:
			for i, v := range xr {
				yr[i] = ((v - m) - ml) * s
			}
		}
	}
}

// sumDev returns sum(x[i]-mu), the correction times len(x) of mu, the
// mean of a float64 row as its rounded sum gives it (the corrected
// two-pass mean): a constant row of 1e30 summed to a mean an ulp off, its
// deviations of an ulp gave it a variance of an ulp squared, and it
// normalised to ±1 instead of 0. The squared deviations are then taken
// from the corrected mean (a pass more for float64 rows only: deviations
// of an ulp of 1e300 would overflow when squared before the correction).
func sumDev(x []float64, mu float64) float64 {
	var s0, s1 float64
	i := 0
	for ; i+2 <= len(x); i += 2 {
		s0 += x[i] - mu
		s1 += x[i+1] - mu
	}
	if i < len(x) {
		s0 += x[i] - mu
	}
	return s0 + s1
}

// sumSqDev returns sum((x[i]-mu)^2) in float64.
func sumSqDev[T Float](x []T, mu float64) float64 {
	var a0, a1, a2, a3 float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		q := x[i : i+4 : i+4]
		d0, d1, d2, d3 := float64(q[0])-mu, float64(q[1])-mu, float64(q[2])-mu, float64(q[3])-mu
		a0 += d0 * d0
		a1 += d1 * d1
		a2 += d2 * d2
		a3 += d3 * d3
	}
	for ; i < len(x); i++ {
		d := float64(x[i]) - mu
		a0 += d * d
	}
	return (a0 + a1) + (a2 + a3)
}

// LayerNormBackward computes, for each row, with xhat = (x - mean) * rstd
// and g = dy * w (g = dy when w is nil):
//
//	dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (written)
//	dw += sum over rows of dy * xhat                     (accumulated)
//	db += sum over rows of dy                            (accumulated)
//
// dw and db may be nil (not wanted). dx may be dy itself. Rows run in
// parallel; dw/db come from fixed row chunks whose float64 partials are
// added in chunk order, so the result does not depend on GOMAXPROCS. It
// panics on mismatched lengths.
func LayerNormBackward[T Float](dx, dw, db, dy, x, mean, rstd, w []T, rows, cols int) {
	checkRows("LayerNormBackward", rows, cols, len(dx), len(dy), len(x))
	mustEq("LayerNormBackward", "mean", len(mean), rows)
	mustEq("LayerNormBackward", "rstd", len(rstd), rows)
	for _, p := range []struct {
		name string
		s    []T
	}{{"w", w}, {"dw", dw}, {"db", db}} {
		if p.s != nil {
			mustEq("LayerNormBackward", p.name, len(p.s), cols)
		}
	}
	if rows == 0 || cols == 0 {
		return
	}
	if dw == nil && db == nil {
		if serial(rows*cols, grainRow) {
			layerNormBackwardRows(dx, nil, nil, dy, x, mean, rstd, w, cols, 0, rows)
			return
		}
		ParallelFor(rows, rowGrain(cols), func(lo, hi int) {
			layerNormBackwardRows(dx, nil, nil, dy, x, mean, rstd, w, cols, lo, hi)
		})
		return
	}
	rowsPer := max(1, lnChunk/cols)
	chunks := (rows + rowsPer - 1) / rowsPer
	p := getScratch(chunks * 2 * cols)
	defer putScratch(p)
	parts := *p
	if serial(rows*cols, grainRow) {
		// The same chunks in order, without a closure (so no allocation).
		for c := 0; c < chunks; c++ {
			part := parts[c*2*cols : (c+1)*2*cols]
			layerNormBackwardRows(dx, part[:cols], part[cols:], dy, x, mean, rstd, w, cols, c*rowsPer, min(rows, (c+1)*rowsPer))
		}
	} else {
		forChunks(rows, rowsPer, func(c, lo, hi int) {
			part := parts[c*2*cols : (c+1)*2*cols]
			layerNormBackwardRows(dx, part[:cols], part[cols:], dy, x, mean, rstd, w, cols, lo, hi)
		})
	}
	total := parts[:2*cols]
	for c := 1; c < chunks; c++ {
		addRow(total, parts[c*2*cols:(c+1)*2*cols])
	}
	if dw != nil {
		storeRow(dw, total[:cols], true)
	}
	if db != nil {
		storeRow(db, total[cols:], true)
	}
}

// lnBlock is the block length over which LayerNormBackward's row sums
// accumulate in T before being added into float64.
const lnBlock = 64

// layerNormBackwardRows does rows [lo, hi); dwp and dbp (float64 partials)
// may be nil. The per-element terms are computed in T (float32 for
// training, as PyTorch does): widening every operand to float64 chains
// the iterations through cvtss2sd's false dependencies. The row sums
// mean(g) and mean(g*xhat) add blocks of lnBlock terms in T (two
// accumulators each) and the blocks in float64; dw and db accumulate in
// float64.
func layerNormBackwardRows[T Float](dx []T, dwp, dbp []float64, dy, x, mean, rstd, w []T, cols, lo, hi int) {
	n := float64(cols)
	for r := lo; r < hi; r++ {
		d, g, xr := dx[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols], x[r*cols:(r+1)*cols]
		g, xr = g[:len(d)], xr[:len(d)]
		// x - mean as the forward pass took it: the mean's rounding to T
		// (mean[r]) and the rest, from the row's exact mean. The rest
		// moves xhat by at most |mean|*rstd ulps of T: where that is
		// under one, T's own rounding of x - m is as large, and the pass
		// over the row that finds it is skipped. A float64 mean is the
		// forward's own (corrected) mean, with no rest: recomputing it
		// uncorrected would put back the ulp the forward took out.
		m, rs := mean[r], rstd[r]
		mu, ml := float64(m), T(0)
		if isF32[T]() && math.Abs(mu*float64(rs)) > 1 {
			mu = sumRow(xr) / n
			ml = T(mu - float64(m))
		}
		var sg, sgx float64
		for b := 0; b < len(d); b += lnBlock {
			e := min(b+lnBlock, len(d))
			gb, xb := g[b:e], xr[b:e]
			xb = xb[:len(gb)]
			var s0, s1, t0, t1 T
			if w != nil {
				wb := w[b:e]
				wb = wb[:len(gb)]
				i := 0
				for ; i+2 <= len(gb); i += 2 {
					g0, g1 := gb[i]*wb[i], gb[i+1]*wb[i+1]
					s0 += g0
					s1 += g1
					t0 += g0 * (((xb[i] - m) - ml) * rs)
					t1 += g1 * (((xb[i+1] - m) - ml) * rs)
				}
				if i < len(gb) {
					g0 := gb[i] * wb[i]
					s0 += g0
					t0 += g0 * (((xb[i] - m) - ml) * rs)
				}
			} else {
				i := 0
				for ; i+2 <= len(gb); i += 2 {
					g0, g1 := gb[i], gb[i+1]
					s0 += g0
					s1 += g1
					t0 += g0 * (((xb[i] - m) - ml) * rs)
					t1 += g1 * (((xb[i+1] - m) - ml) * rs)
				}
				if i < len(gb) {
					s0 += gb[i]
					t0 += gb[i] * (((xb[i] - m) - ml) * rs)
				}
			}
			sg += float64(s0 + s1)
			sgx += float64(t0 + t1)
		}
		if dwp != nil {
			dwp, dbp := dwp[:len(d)], dbp[:len(d)]
			rs64 := float64(rs)
			for i, v := range xr {
				gi := float64(g[i])
				dwp[i] += gi * (float64(v) - mu) * rs64
				dbp[i] += gi
			}
		}
		c1, c2 := T(sg/n), T(sgx/n)
		if w != nil {
			w := w[:len(d)]
			for i, v := range xr {
				d[i] = rs * (g[i]*w[i] - c1 - ((v-m)-ml)*rs*c2)
			}
		} else {
			for i, v := range xr {
				d[i] = rs * (g[i] - c1 - ((v-m)-ml)*rs*c2)
			}
		}
	}
}
