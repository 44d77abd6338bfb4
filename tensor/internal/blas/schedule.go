package blas

// engine runs products of one element type: it handles the cases BLAS
// defines without arithmetic, then decides whether a product or a batch
// is split over goroutines, and calls the kernels.
type engine[T float] struct {
	big   func(problem[T]) // the backend's kernel: library or gonum
	small func(problem[T]) // gonum: below tinyWork a call into C costs more than the product
	split bool             // split single products over goroutines (libraries only: gonum splits its own)
}

// strides describes a strided batch.
type strides struct{ a, b, c, batch int }

// Thresholds, in multiply-adds (m*n*k), measured on the two-core
// development machine (doc.go has the numbers).
const (
	// tinyWork: below it, gonum on the calling goroutine beats the fixed
	// cost of a call into the library (about 0.17 µs).
	tinyWork = 256
	// splitWork: from it on, a single product is split over goroutines;
	// below it, waking a second core costs more than it saves.
	splitWork = 1 << 21
	// batchWork: from it on (the whole batch), a batch is spread over
	// goroutines.
	batchWork = 1 << 20
	// splitAlign: pieces of a split product are multiples of this many
	// rows or columns, a multiple of every library's register tile.
	splitAlign = 16
)

// kernel computes p on the calling goroutine. p is checked, m, n, k > 0
// and alpha != 0.
func (e *engine[T]) kernel(p problem[T]) {
	if p.work() < tinyWork {
		e.small(p)
		return
	}
	e.big(p)
}

// single computes one checked product.
func (e *engine[T]) single(p problem[T]) {
	if p.m == 0 || p.n == 0 {
		return
	}
	if p.k == 0 || p.alpha == 0 {
		p.scaleC()
		return
	}
	w := threads()
	if !e.split || w < 2 || p.work() < splitWork {
		e.kernel(p)
		return
	}
	e.splitProduct(p, w)
}

// splitProduct computes p on w workers. It is apart from single because
// the closure captures p, which moves p to the heap: the serial paths
// must not pay that allocation.
func (e *engine[T]) splitProduct(p problem[T], w int) {
	// Cut the longer side of C into pieces, two per worker, handed out
	// as workers come free: a worker that wakes late or shares its core
	// takes fewer pieces. Splitting rows repacks B per piece and
	// splitting columns repacks A; the longer side keeps both cheap.
	//
	// The bits of C must not depend on w (a fixed seed gives the same
	// training run on 2 cores and on 16), so a piece must be computed
	// the way the same rows or columns are within the whole product:
	//   - every piece runs on big, as the whole product does (its work is
	//     at least splitWork): a piece below tinyWork must not go to
	//     gonum, which sums in another order;
	//   - a last piece narrower than splitAlign joins the one before it:
	//     a piece of one row is a vector product, which the own GEMM
	//     computes on another path (own_gemv.go) and a library may hand
	//     to its gemv, both summing in another order.
	// Within the own GEMM an element's sums do not depend on where its
	// tile lies (see macroTile), so the cuts may fall anywhere; multiples
	// of splitAlign also keep a library's register tiles where they lie
	// in the whole product.
	dim := max(p.m, p.n)
	pieces := min(2*w, ceilDiv(dim, splitAlign))
	chunk := ceilDiv(ceilDiv(dim, pieces), splitAlign) * splitAlign
	pieces = ceilDiv(dim, chunk)
	if pieces > 1 && dim-(pieces-1)*chunk < splitAlign {
		pieces--
	}
	byRows := p.m >= p.n
	parallelDo(w, pieces, func(i int) {
		lo, hi := i*chunk, (i+1)*chunk
		if i == pieces-1 {
			hi = dim
		}
		if byRows {
			e.big(p.rows(lo, hi))
		} else {
			e.big(p.cols(lo, hi))
		}
	})
}

// batched computes a checked strided batch.
func (e *engine[T]) batched(p problem[T], s strides) {
	if s.batch == 0 || p.m == 0 || p.n == 0 {
		return
	}
	if s.batch == 1 {
		e.single(p)
		return
	}
	if p.k == 0 || p.alpha == 0 {
		for i := range s.batch {
			q := p.entry(i, 0, 0, s.c)
			q.scaleC()
		}
		return
	}
	w := threads()
	switch {
	case w < 2 || mulSat(p.work(), s.batch) < batchWork:
		for i := range s.batch {
			e.kernel(p.entry(i, s.a, s.b, s.c))
		}
	case s.batch < w:
		// Too few matrices to go round: split each one instead.
		for i := range s.batch {
			e.single(p.entry(i, s.a, s.b, s.c))
		}
	default:
		e.spreadBatch(p, s, w)
	}
}

// spreadBatch computes the batch on w workers, one product per piece,
// handed out as workers come free; each runs single-threaded in the
// library. (Apart from batched for the reason splitProduct is.)
func (e *engine[T]) spreadBatch(p problem[T], s strides, w int) {
	parallelDo(w, s.batch, func(i int) {
		e.kernel(p.entry(i, s.a, s.b, s.c))
	})
}

func ceilDiv(x, y int) int { return (x + y - 1) / y }
