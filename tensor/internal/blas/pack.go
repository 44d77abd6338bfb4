package blas

// Packing copies a block of op(A) or op(B) into the order the
// micro-kernel reads it, so that the kernel streams contiguous memory
// whatever the transposes and leading dimensions: op(A) in strips of mr
// rows, each strip column after column (mr floats a step of k); op(B) in
// strips of nr columns, each strip row after row (nr floats a step).
// Strips past the edge of the matrix are padded with zeros, which the
// kernel multiplies harmlessly; the padded rows and columns of its tile
// are never written back.

// packA packs op(A)[i0:i0+mb, l0:l0+kb] into dst.
func packA(dst []float32, p *problem[float32], i0, mb, l0, kb int) {
	a, lda := p.a, p.lda
	for s := 0; s < mb; s += mr {
		rows := min(mr, mb-s)
		d := dst[s*kb : s*kb+mr*kb]
		i := i0 + s
		switch {
		case p.tA && rows == mr: // A is k×m: a step of k is a run of rows in one row of A
			for l := range kb {
				src := a[(l0+l)*lda+i : (l0+l)*lda+i+mr : (l0+l)*lda+i+mr]
				dd := d[l*mr : l*mr+mr : l*mr+mr]
				dd[0], dd[1], dd[2], dd[3], dd[4], dd[5] = src[0], src[1], src[2], src[3], src[4], src[5]
			}
		case p.tA:
			for l := range kb {
				src := a[(l0+l)*lda+i:]
				dd := d[l*mr : l*mr+mr]
				copy(dd, src[:rows])
				clear(dd[rows:])
			}
		case rows == mr:
			r0 := a[i*lda+l0 : i*lda+l0+kb]
			r1 := a[(i+1)*lda+l0 : (i+1)*lda+l0+kb]
			r2 := a[(i+2)*lda+l0 : (i+2)*lda+l0+kb]
			r3 := a[(i+3)*lda+l0 : (i+3)*lda+l0+kb]
			r4 := a[(i+4)*lda+l0 : (i+4)*lda+l0+kb]
			r5 := a[(i+5)*lda+l0 : (i+5)*lda+l0+kb]
			for l := range kb {
				dd := d[l*mr : l*mr+mr : l*mr+mr]
				dd[0], dd[1], dd[2], dd[3], dd[4], dd[5] = r0[l], r1[l], r2[l], r3[l], r4[l], r5[l]
			}
		default:
			clear(d)
			for r := range rows {
				src := a[(i+r)*lda+l0 : (i+r)*lda+l0+kb]
				for l, v := range src {
					d[l*mr+r] = v
				}
			}
		}
	}
}

// packB packs op(B)[l0:l0+kb, j0:j0+nb] into dst, in strips of nr
// columns.
func packB(dst []float32, p *problem[float32], nr, l0, kb, j0, nb int) {
	b, ldb := p.b, p.ldb
	for s := 0; s < nb; s += nr {
		cols := min(nr, nb-s)
		d := dst[s*kb : s*kb+nr*kb]
		j := j0 + s
		if !p.tB { // B is k×n: a step of k is a run of columns in one row of B
			for l := range kb {
				src := b[(l0+l)*ldb+j:]
				dd := d[l*nr : l*nr+nr]
				copy(dd, src[:cols])
				clear(dd[cols:])
			}
			continue
		}
		// B is n×k: each column of op(B) is a row of B, scattered nr apart;
		// four rows at a time, so that each step of k stores four
		// adjacent floats with one bounds check.
		if cols < nr {
			clear(d)
		}
		c := 0
		for ; c+4 <= cols; c += 4 {
			r0 := b[(j+c)*ldb+l0 : (j+c)*ldb+l0+kb]
			r1 := b[(j+c+1)*ldb+l0 : (j+c+1)*ldb+l0+kb]
			r2 := b[(j+c+2)*ldb+l0 : (j+c+2)*ldb+l0+kb]
			r3 := b[(j+c+3)*ldb+l0 : (j+c+3)*ldb+l0+kb]
			r1, r2, r3 = r1[:len(r0)], r2[:len(r0)], r3[:len(r0)]
			for l := range r0 {
				dd := d[l*nr+c : l*nr+c+4 : l*nr+c+4]
				dd[0], dd[1], dd[2], dd[3] = r0[l], r1[l], r2[l], r3[l]
			}
		}
		for ; c < cols; c++ {
			src := b[(j+c)*ldb+l0 : (j+c)*ldb+l0+kb]
			for l, v := range src {
				d[l*nr+c] = v
			}
		}
	}
}
