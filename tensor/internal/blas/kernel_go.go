package blas

// microKernel is one register-tiled kernel of the own GEMM: it computes
// a tile of mr × nr elements, C = alpha*ap·bp + beta*C (C read only when
// load), from k steps of packed panels (mr floats of A and nr of B a
// step). The caller guarantees the panels' lengths and that the tile
// lies inside c (row distance ldc).
type microKernel struct {
	name string
	nr   int // 16 or 32; mr is always 6
	run  func(k int, ap, bp, c []float32, ldc int, alpha, beta float32, load bool)
	// direct is run reading A where it lies: mr rows of a row-major A,
	// lda apart, k floats of each from a's start (a covers them); nil
	// when the kernel has no such form. The own GEMM then packs no A
	// block but the last strip of fewer than mr rows (for a product of
	// k = 128, as the tiny GPT's, packing A took a fifth of the time).
	direct func(k int, a []float32, lda int, bp, c []float32, ldc int, alpha, beta float32, load bool)
}

// goKernels are the kernels in plain Go: the definitions the assembly is
// tested against, and what the driver is tested with on builds without
// assembly.
var goKernels = []*microKernel{
	{name: "Go 6×16 kernel", nr: 16, run: func(k int, ap, bp, c []float32, ldc int, alpha, beta float32, load bool) {
		tileGo(16, k, ap, bp, c, ldc, alpha, beta, load)
	}, direct: func(k int, a []float32, lda int, bp, c []float32, ldc int, alpha, beta float32, load bool) {
		tileGoDirect(16, k, a, lda, bp, c, ldc, alpha, beta, load)
	}},
	{name: "Go 6×32 kernel", nr: 32, run: func(k int, ap, bp, c []float32, ldc int, alpha, beta float32, load bool) {
		tileGo(32, k, ap, bp, c, ldc, alpha, beta, load)
	}},
}

// tileGoDirect is tileGo reading A's mr rows where they lie (lda apart),
// the definition of the direct kernels.
func tileGoDirect(nr, k int, a []float32, lda int, bp, c []float32, ldc int, alpha, beta float32, load bool) {
	ap := make([]float32, k*mr)
	for l := range k {
		for r := range mr {
			ap[l*mr+r] = a[r*lda+l]
		}
	}
	tileGo(nr, k, ap, bp, c, ldc, alpha, beta, load)
}

// haveKernel reports whether the CPU runs an assembly kernel, and so
// whether the own GEMM is the float32 fallback.
var haveKernel = len(kernels) > 0

// bestKernel is the fastest kernel the CPU runs; nil when none.
var bestKernel = func() *microKernel {
	if len(kernels) == 0 {
		return nil
	}
	return kernels[0]
}()

func tileGo(nr, k int, ap, bp, c []float32, ldc int, alpha, beta float32, load bool) {
	var acc [mr][maxNR]float32
	for l := range k {
		a := ap[l*mr : l*mr+mr]
		b := bp[l*nr : l*nr+nr]
		for r := range mr {
			for j := range nr {
				acc[r][j] += a[r] * b[j]
			}
		}
	}
	for r := range mr {
		row := c[r*ldc : r*ldc+nr]
		for j := range nr {
			v := alpha * acc[r][j]
			if load {
				v += beta * row[j]
			}
			row[j] = v
		}
	}
}
