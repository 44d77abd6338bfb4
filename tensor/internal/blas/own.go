package blas

import "sync"

// The package's own float32 GEMM, for machines without a BLAS library
// (see "The own kernel" in doc.go): GotoBLAS/BLIS blocking around a
// 6×16 (AVX2) or 6×32 (AVX-512) micro-kernel.

// Register tile and cache blocks, in elements. A kc×nr strip of packed B
// (16 or 32 KiB) stays in L1 while the kernel sweeps it down an mc×kc
// block of packed A (144 KiB, L2); a kc×nc panel of B (2 MiB) is reused
// by every block of A.
const (
	mr    = 6
	maxNR = 32
	kc    = 256
	mc    = 144  // a multiple of mr
	nc    = 2048 // a multiple of every nr
)

// panels is one goroutine's packing space, pooled so that the hot path
// does not allocate.
type panels struct {
	a []float32 // mc×kc: op(A) block as mr-row strips
	b []float32 // kc×nc: op(B) panel as nr-column strips
	t []float32 // mr×maxNR: an edge tile before it is merged into C
}

var panelPool = sync.Pool{New: func() any {
	return &panels{a: make([]float32, mc*kc), b: make([]float32, kc*nc), t: make([]float32, mr*maxNR)}
}}

// ownGemm computes a checked product with m, n, k > 0 and alpha != 0 on
// the calling goroutine, on kernel kr (bestKernel: the fastest the CPU
// runs); a product of one row takes the direct path (own_gemv.go).
func ownGemm(p problem[float32], kr *microKernel) {
	if p.m == 1 {
		ownGemv(p)
		return
	}
	buf := panelPool.Get().(*panels)
	direct := kr.direct != nil && !p.tA // A row-major: its rows are read where they lie
	// k is cut into equal blocks of at most kc, so that no block is short.
	kBlocks := ceilDiv(p.k, kc)
	kStep := ceilDiv(p.k, kBlocks)
	for jc := 0; jc < p.n; jc += nc {
		nb := min(nc, p.n-jc)
		for pc := 0; pc < p.k; pc += kStep {
			kb := min(kStep, p.k-pc)
			beta, load := p.beta, p.beta != 0
			if pc > 0 { // later blocks add to what the first wrote
				beta, load = 1, true
			}
			packB(buf.b, &p, kr.nr, pc, kb, jc, nb)
			for ic := 0; ic < p.m; ic += mc {
				mb := min(mc, p.m-ic)
				if direct {
					// Only the last strip of fewer than mr rows is packed
					// (into the start of buf.a): the kernel reads the
					// others in A.
					if full := mb / mr * mr; full < mb {
						packA(buf.a, &p, ic+full, mb-full, pc, kb)
					}
				} else {
					packA(buf.a, &p, ic, mb, pc, kb)
				}
				macroTile(kr, buf, &p, ic, mb, jc, nb, pc, kb, beta, load, direct)
			}
		}
	}
	panelPool.Put(buf)
}

// macroTile computes C[ic:ic+mb, jc:jc+nb] from the packed block of A
// (k from pc, kb of it) and panel of B: full tiles straight into C, edge
// tiles through buf.t. With direct, the strips of mr rows are read in A
// by kr.direct, and only a last short strip is packed (at buf.a's start).
//
// An edge tile is stored by the kernel itself, alpha and beta included,
// into buf.t holding the tile's part of C (when load), and only copied
// back: its elements are rounded exactly as a full tile's (alpha*acc,
// then beta*C added in one FMA), so an element's bits do not depend on
// whether its tile is full. That matters beyond edges: where a split
// product is cut decides which tiles are edges, and C must come out the
// same on any number of threads (a merge in Go, alpha*t + beta*C, rounds
// twice where the kernel rounds once, and differs whenever beta is
// neither 0 nor 1).
func macroTile(kr *microKernel, buf *panels, p *problem[float32], ic, mb, jc, nb, pc, kb int, beta float32, load, direct bool) {
	c, ldc, alpha, nr := p.c, p.ldc, p.alpha, kr.nr
	full := mb / mr * mr // the strips of mr rows
	for jr := 0; jr < nb; jr += nr {
		nn := min(nr, nb-jr)
		bp := buf.b[jr*kb : (jr+nr)*kb]
		for ir := 0; ir < mb; ir += mr {
			mm := min(mr, mb-ir)
			at := (ic+ir)*ldc + jc + jr
			edge := mm < mr || nn < nr
			// A full tile goes straight into C (the bounds check the
			// assembly does not do), an edge tile into buf.t.
			dst, ldd := buf.t, nr
			if edge && load {
				for r := range mm {
					copy(buf.t[r*nr:r*nr+nn], c[at+r*ldc:at+r*ldc+nn])
				}
			}
			if !edge {
				dst, ldd = c[at:at+(mr-1)*ldc+nr], ldc
			}
			if direct && ir < full {
				a0 := (ic+ir)*p.lda + pc // mr rows of kb: the bounds check again
				kr.direct(kb, p.a[a0:a0+(mr-1)*p.lda+kb], p.lda, bp, dst, ldd, alpha, beta, load)
			} else {
				off := ir
				if direct {
					off = 0 // the short strip, packed alone
				}
				kr.run(kb, buf.a[off*kb:(off+mr)*kb], bp, dst, ldd, alpha, beta, load)
			}
			if edge {
				for r := range mm {
					copy(c[at+r*ldc:at+r*ldc+nn], buf.t[r*nr:r*nr+nn])
				}
			}
		}
	}
}
