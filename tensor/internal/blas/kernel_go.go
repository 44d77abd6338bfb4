package blas

// tileGo is the micro-kernel in plain Go: the definition the assembly is
// tested against, and the kernel of builds without it. C[0:mr, 0:nr] =
// alpha*ap·bp + beta*C, with C read only when load.
func tileGo(k int, ap, bp, c []float32, ldc int, alpha, beta float32, load bool) {
	var acc [mr][nr]float32
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
