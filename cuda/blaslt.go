package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"
)

// cuBLASLt: GEMMs with fused epilogues (a bias added to every row, or the
// bias gradient reduced from an operand), which plain cuBLAS cannot do.
// A BLASLt handle takes row-major problems (LtMatmul), converts each to
// cuBLASLt's column-major call as blas_gemm.go does, and keeps, per
// distinct problem, the descriptors cuBLASLt needs and the algorithm its
// heuristic chose: the first call of a shape pays for
// cublasLtMatmulAlgoGetHeuristic and a dozen descriptor calls, every
// later one is cublasLtMatmul (and one attribute call for the bias
// pointer), with no Go allocation.

// EnvCUBLASLtLib names the libcublasLt file to load instead of searching.
const EnvCUBLASLtLib = "STRATA_CUBLASLT_LIB"

// ErrNoCUBLASLt: libcublasLt could not be loaded or lacks a function this
// package calls.
var ErrNoCUBLASLt = errors.New("cuda: cuBLASLt library not available")

// cublasLtSpec finds libcublasLt where libcublas is found: it ships beside
// it in every toolkit and wheel.
func cublasLtSpec() libSpec {
	s := cublasSpec()
	s.What = "cuBLASLt (libcublasLt)"
	s.Env = EnvCUBLASLtLib
	s.Names = []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}
	s.Fix = "install cuBLAS from the CUDA toolkit (13.x or 12.x; libcublasLt comes with it), add its lib64 folder to " +
		"LD_LIBRARY_PATH, or set " + EnvCUBLASLtLib + " to the full path of libcublasLt.so.13"
	s.Kind = ErrNoCUBLASLt
	return s
}

// ltLib is the loaded libcublasLt.
type ltLib struct {
	path string

	create, destroy, getVersion          symbol
	descCreate, descDestroy, descSetAttr symbol
	layoutCreate, layoutDestroy          symbol
	prefCreate, prefSetAttr, prefDestroy symbol
	heuristic, matmul                    symbol
	getStatusName, getStatusString       uintptr // optional
}

func (l *ltLib) symbols() []symbolSpec {
	req := func(dst *symbol, names ...string) symbolSpec { return symbolSpec{dst, true, names} }
	return []symbolSpec{
		req(&l.create, "cublasLtCreate"),
		req(&l.destroy, "cublasLtDestroy"),
		req(&l.getVersion, "cublasLtGetVersion"),
		req(&l.descCreate, "cublasLtMatmulDescCreate"),
		req(&l.descDestroy, "cublasLtMatmulDescDestroy"),
		req(&l.descSetAttr, "cublasLtMatmulDescSetAttribute"),
		req(&l.layoutCreate, "cublasLtMatrixLayoutCreate"),
		req(&l.layoutDestroy, "cublasLtMatrixLayoutDestroy"),
		req(&l.prefCreate, "cublasLtMatmulPreferenceCreate"),
		req(&l.prefSetAttr, "cublasLtMatmulPreferenceSetAttribute"),
		req(&l.prefDestroy, "cublasLtMatmulPreferenceDestroy"),
		req(&l.heuristic, "cublasLtMatmulAlgoGetHeuristic"),
		req(&l.matmul, "cublasLtMatmul"),
	}
}

// loadBLASLt finds libcublasLt and resolves its symbols.
func loadBLASLt(getenv func(string) string) (*ltLib, error) {
	l := &ltLib{}
	var err error
	l.path, l.getStatusName, l.getStatusString, err = loadBLASFamily(cublasLtSpec(), "cuBLASLt", "cublasLt", ErrNoCUBLASLt, l.symbols(), getenv)
	if err != nil {
		return nil, err
	}
	return l, nil
}

var ltState struct {
	once sync.Once
	lib  *ltLib
	err  error
}

func getBLASLt() (*ltLib, error) {
	ltState.once.Do(func() { ltState.lib, ltState.err = loadBLASLt(os.Getenv) })
	return ltState.lib, ltState.err
}

// newLtError describes a failed cuBLASLt call (its status type is
// cublasStatus_t: the error's Library is LibCUBLAS), named by
// cublasLtGetStatusName where the library has it.
func newLtError(lib *ltLib, call string, status uint32, detail string) *Error {
	var names *blasLib
	if lib != nil {
		names = &blasLib{getStatusName: lib.getStatusName, getStatusString: lib.getStatusString}
	}
	return newBLASError(names, call, status, detail)
}

// LtMatmul is one product for BLASLt.Matmul, row-major like
// GemmStridedBatchedExRowMajor: C = alpha op(A) op(B) + beta C, then the
// epilogue, with op(A) M x K, op(B) K x N and C M x N; LDA, LDB and LDC
// are the strides between rows. C is read and written in place (cuBLASLt's
// D is C). A and B are f32, f16 or bf16 (one type), C their type or f32,
// Compute a float32 compute type. Bias is the epilogue's vector (nil
// without one): N elements for EpilogueBias and EpilogueBiasGradB, M for
// EpilogueBiasGradA, of TypeBias (f32, the zero value, or C's type).
type LtMatmul struct {
	TransA, TransB Op
	M, N, K        int
	Alpha, Beta    float32
	A              DevicePtr
	TypeA          DataType
	LDA            int
	B              DevicePtr
	TypeB          DataType
	LDB            int
	C              DevicePtr
	TypeC          DataType
	LDC            int
	Compute        ComputeType
	Epilogue       Epilogue
	Bias           DevicePtr
	TypeBias       DataType
}

const ltOp = "BLASLt.Matmul"

// validate checks g in its row-major terms: the GEMM as gemm.validate
// does, then the epilogue and its bias.
func (g *LtMatmul) validate() error {
	gm := gemm{op: ltOp, rowMajor: true, ex: true, transA: g.TransA, transB: g.TransB, m: g.M, n: g.N, k: g.K,
		a: g.A, b: g.B, c: g.C, lda: g.LDA, ldb: g.LDB, ldc: g.LDC, batch: 1,
		ta: g.TypeA, tb: g.TypeB, tc: g.TypeC, compute: g.Compute}
	if err := gm.validate(); err != nil {
		return err
	}
	switch g.Epilogue {
	case EpilogueNone:
		if g.Bias != 0 {
			return invalidArg(ltOp, "Bias %s given without an epilogue that uses it", g.Bias)
		}
		return nil
	case EpilogueBias, EpilogueBiasGradA, EpilogueBiasGradB:
	default:
		return invalidArg(ltOp, "unknown epilogue %d", int(g.Epilogue))
	}
	if g.Bias == 0 && g.M > 0 && g.N > 0 {
		return invalidArg(ltOp, "epilogue %s needs a bias vector of %d elements: Bias is nil", g.Epilogue, g.Epilogue.biasLen(g.M, g.N))
	}
	if g.TypeBias != TypeF32 && g.TypeBias != g.TypeC {
		return invalidArg(ltOp, "bias is %s for a %s C: use f32 or %s", g.TypeBias, g.TypeC, g.TypeC)
	}
	return nil
}

// ltKey is a problem in cuBLASLt's column-major terms with everything
// that decides its descriptors and algorithm: not the pointers, only how
// they are aligned (cuBLASLt's kernels assume the alignment the heuristic
// was told), and not alpha or beta.
type ltKey struct {
	transA, transB         Op
	m, n, k                int
	lda, ldb, ldc          int
	ta, tb, tc, tbias      DataType
	compute                ComputeType
	epilogue               uint32 // cublasLtEpilogue_t
	alignA, alignB, alignC uint32 // bytes, at most 256
	alignBias              uint32
}

func (k *ltKey) String() string {
	s := fmt.Sprintf("column-major %s%s m=%d n=%d k=%d lda=%d ldb=%d ldc=%d types=%s,%s,%s compute=%s epilogue=%d align=%d,%d,%d",
		k.transA, k.transB, k.m, k.n, k.k, k.lda, k.ldb, k.ldc, k.ta, k.tb, k.tc, k.compute, k.epilogue, k.alignA, k.alignB, k.alignC)
	if k.epilogue != ltEpilogueDefault {
		s += fmt.Sprintf(" bias=%s align %d", k.tbias, k.alignBias)
	}
	return s
}

// ltCall is an LtMatmul converted to cuBLASLt's column-major call.
type ltCall struct {
	key         ltKey
	alpha, beta float32
	a, b, c     DevicePtr
	bias        DevicePtr
	biasLen     int // elements, for messages and tests
}

// ptrAlign is the largest power of two up to 256 that divides p.
func ptrAlign(p DevicePtr) uint32 {
	if p == 0 {
		return 256
	}
	return uint32(min(256, uint64(p)&-uint64(p)))
}

// realOp treats OpC as OpT: the types here are real.
func realOp(o Op) Op {
	if o == OpC {
		return OpT
	}
	return o
}

// columnMajor converts g (validated) as gemm.columnMajor does: row-major
// C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T on the same bytes,
// so the operands, their ops, leading dimensions and types swap, and so do
// m and n. The epilogue maps with them (Epilogue.columnMajor).
func (g *LtMatmul) columnMajor() ltCall {
	c := ltCall{
		key: ltKey{transA: realOp(g.TransB), transB: realOp(g.TransA), m: g.N, n: g.M, k: g.K,
			lda: g.LDB, ldb: g.LDA, ldc: g.LDC, ta: g.TypeB, tb: g.TypeA, tc: g.TypeC, compute: g.Compute,
			epilogue: g.Epilogue.columnMajor(), alignA: ptrAlign(g.B), alignB: ptrAlign(g.A), alignC: ptrAlign(g.C)},
		alpha: g.Alpha, beta: g.Beta, a: g.B, b: g.A, c: g.C,
	}
	if g.Epilogue.needsBias() {
		c.key.tbias, c.key.alignBias = g.TypeBias, ptrAlign(g.Bias)
		c.bias, c.biasLen = g.Bias, g.Epilogue.biasLen(g.M, g.N)
	}
	return c
}

// ltPlan is what one distinct problem needs, made on its first call: the
// descriptors and the algorithm. The algorithm lives in this Go object
// (the heap does not move it; KeepAlive holds it across the call), read
// by cublasLtMatmul during the call only.
type ltPlan struct {
	key              ltKey
	desc, la, lb, lc uintptr
	res              ltHeuristicResult
	// err, when set, is the problem's answer: cuBLASLt has no algorithm
	// (it wraps ErrNotSupported). Kept, so a caller that falls back on
	// every step pays the search once.
	err error
}

// ltMaxPlans bounds the cache; past it every plan is dropped and the
// problems are planned again (a model has a few dozen shapes).
const ltMaxPlans = 256

// BLASLt is a cuBLASLt handle bound to one context, with its plans. Its
// methods serialise on a mutex; goroutines that multiply concurrently
// should each have their own handle and stream.
type BLASLt struct {
	ctx *Context
	lib *ltLib
	h   uintptr

	mu        sync.Mutex
	pref      uintptr // cublasLtMatmulPreference_t, shared by the plans
	stream    *Stream
	ws        DevicePtr
	wsSize    int
	plans     []*ltPlan
	last      int // index of the last plan used
	version   int
	destroyed bool
	// released: a Destroy failed after releasing the plans and the
	// preference, so the handle is kept for Destroy to try again but a
	// product would hand cuBLASLt a null preference.
	released bool
}

// NewBLASLt loads cuBLASLt (once per process) and creates a handle for
// the context. It works on the default stream, with no workspace, until
// SetStream and SetWorkspace.
func (c *Context) NewBLASLt() (*BLASLt, error) {
	lib, err := getBLASLt()
	if err != nil {
		return nil, err
	}
	b := &BLASLt{ctx: c, lib: lib}
	f := getFrame()
	defer f.release()
	if err := b.call(f, lib.create, c.dev.String(), f.outAddr(0)); err != nil {
		return nil, err
	}
	b.h = uintptr(f.out[0])
	if err := b.call(f, lib.prefCreate, "", f.outAddr(0)); err != nil {
		_, _ = b.invoke(f, lib.destroy, b.h)
		return nil, err
	}
	b.pref = uintptr(f.out[0])
	b.version = int(f.call(lib.getVersion.addr))
	return b, nil
}

// invoke calls a cuBLASLt function with the context current on this
// thread, as BLAS.invoke does. It allocates nothing.
func (b *BLASLt) invoke(f *frame, sym symbol, args ...uintptr) (uint32, error) {
	return b.ctx.invokeBLASFamily(f, sym, args...)
}

// call invokes sym and turns a failed status into an error with detail.
func (b *BLASLt) call(f *frame, sym symbol, detail string, args ...uintptr) error {
	st, err := b.invoke(f, sym, args...)
	if err != nil {
		return err
	}
	if st != cublasStatusSuccess {
		return newLtError(b.lib, sym.name, st, detail)
	}
	return nil
}

// setAttr sets a descriptor or preference attribute of size bytes (4 or
// 8) to v, passed through out slot 3.
func (b *BLASLt) setAttr(f *frame, sym symbol, obj uintptr, attr int, v uint64, size int) error {
	f.out[3] = v // little-endian: a 4-byte value is the slot's first bytes
	st, err := b.invoke(f, sym, obj, uintptr(attr), f.outAddr(3), uintptr(size))
	if err != nil {
		return err
	}
	if st != cublasStatusSuccess {
		return newLtError(b.lib, sym.name, st, fmt.Sprintf("attribute %d = %d (%d bytes)", attr, v, size))
	}
	return nil
}

// Version returns cuBLASLt's version number (e.g. 130000).
func (b *BLASLt) Version() int { return b.version }

// LibraryPath returns the file cuBLASLt was loaded from.
func (b *BLASLt) LibraryPath() string { return b.lib.path }

// Context returns the handle's context.
func (b *BLASLt) Context() *Context { return b.ctx }

// SetStream makes later products queue on s (nil: the default stream).
func (b *BLASLt) SetStream(s *Stream) error {
	if err := b.made("BLASLt.SetStream"); err != nil {
		return err
	}
	if _, err := b.ctx.streamHandle("BLASLt.SetStream", s); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable("BLASLt.SetStream"); err != nil {
		return err
	}
	b.stream = s
	return nil
}

// SetWorkspace gives cuBLASLt size bytes of device memory at p (256-byte
// aligned) for the algorithms that need scratch space; without one, only
// algorithms that need none are chosen. The memory must stay allocated,
// and unused by anything else while products run, until the handle is
// destroyed or given another workspace. 32 MiB suits Hopper. The plans
// made so far are dropped: their algorithms were chosen for the old size.
func (b *BLASLt) SetWorkspace(p DevicePtr, size int) error {
	const op = "BLASLt.SetWorkspace"
	if size < 0 {
		return invalidArg(op, "negative size %d", size)
	}
	if (p == 0) != (size == 0) {
		return invalidArg(op, "pointer %s with size %d: give both or neither", p, size)
	}
	if p%256 != 0 {
		return invalidArg(op, "pointer %s is not 256-byte aligned", p)
	}
	if err := b.made(op); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(op); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	if err := b.setAttr(f, b.lib.prefSetAttr, b.pref, ltPrefMaxWorkspaceBytes, uint64(size), 8); err != nil {
		return err
	}
	b.ws, b.wsSize = p, size
	return b.dropPlans(f)
}

// made refuses a nil BLASLt and one not made by NewBLASLt (the zero
// value), which has no context or library to call.
func (b *BLASLt) made(op string) error {
	if b == nil || b.ctx == nil || b.lib == nil {
		return invalidArg(op, "cuBLASLt handle not made by NewBLASLt")
	}
	return nil
}

// usable refuses a destroyed handle, and one whose Destroy failed part
// way (released).
func (b *BLASLt) usable(op string) error {
	switch {
	case b.destroyed:
		return invalidArg(op, "cuBLASLt handle was destroyed")
	case b.released:
		return invalidArg(op, "cuBLASLt handle's Destroy failed after releasing its plans and preference: only Destroy may be called again")
	}
	return nil
}

// Plans returns how many distinct problems the handle has planned (for
// tests and statistics).
func (b *BLASLt) Plans() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.plans)
}

// Matmul validates g, finds or makes the plan of its problem, and runs
// cublasLtMatmul on the handle's stream. A problem cuBLASLt has no
// algorithm for (a type or epilogue combination it lacks, an empty
// reduction) returns an error wrapping ErrNotSupported: the caller then
// runs the product and the epilogue another way. cuBLASLt 13.1 (on the
// H200) reduces a bias gradient only from an operand stored K rows long:
// EpilogueBiasGradA with TransA = OpT (dW = dYᵀ X, dY stored K x M) and
// EpilogueBiasGradB with TransB = OpN; the other two transposes of each
// answer ErrNotSupported, as does an empty reduction (K = 0). An empty
// product (M or N is 0) with EpilogueNone or EpilogueBias does nothing.
// The bias gradient is the plain sum, not scaled by Alpha.
func (b *BLASLt) Matmul(g LtMatmul) error {
	if err := g.validate(); err != nil {
		return err
	}
	return b.run(&g)
}

// run is Matmul after validation.
func (b *BLASLt) run(g *LtMatmul) error {
	if g.M == 0 || g.N == 0 || g.K == 0 {
		if g.K > 0 && !(g.Epilogue == EpilogueBiasGradA || g.Epilogue == EpilogueBiasGradB) {
			return nil // nothing to compute
		}
		return notSupported(ltOp, "M=%d N=%d K=%d with epilogue %s: an empty product or reduction is not left to cuBLASLt",
			g.M, g.N, g.K, g.Epilogue)
	}
	if err := b.made(ltOp); err != nil {
		return err
	}
	c := g.columnMajor()
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(ltOp); err != nil {
		return err
	}
	if err := boundStream(ltOp, b.stream); err != nil {
		return err
	}
	f := getFrame()
	defer f.release()
	p, err := b.plan(f, &c)
	if err != nil {
		return err
	}
	if p.err != nil {
		return p.err
	}
	if c.bias != 0 {
		if err := b.setAttr(f, b.lib.descSetAttr, p.desc, ltDescBiasPointer, uint64(c.bias), 8); err != nil {
			return err
		}
	}
	f.scal[0], f.scal[1] = c.alpha, c.beta
	C := uintptr(c.c)
	st, err := b.invoke(f, b.lib.matmul, b.h, p.desc, f.scalAddr(0), uintptr(c.a), p.la, uintptr(c.b), p.lb,
		f.scalAddr(1), C, p.lc, C, p.lc, uintptr(unsafe.Pointer(&p.res.algo)), uintptr(b.ws), uintptr(b.wsSize),
		b.stream.Handle())
	runtime.KeepAlive(p)
	if err != nil {
		return err
	}
	if st != cublasStatusSuccess {
		return newLtError(b.lib, b.lib.matmul.name, st, ltOp+" "+c.key.String())
	}
	return nil
}

// plan returns c's plan, making it on the first call of its problem.
func (b *BLASLt) plan(f *frame, c *ltCall) (*ltPlan, error) {
	if b.last < len(b.plans) && b.plans[b.last].key == c.key {
		return b.plans[b.last], nil
	}
	for i, p := range b.plans {
		if p.key == c.key {
			b.last = i
			return p, nil
		}
	}
	if len(b.plans) >= ltMaxPlans {
		if err := b.dropPlans(f); err != nil {
			return nil, err
		}
	}
	p, err := b.makePlan(f, c)
	if err != nil {
		return nil, err
	}
	b.plans = append(b.plans, p)
	b.last = len(b.plans) - 1
	return p, nil
}

// makePlan creates the descriptors of c's problem and asks the heuristic
// for its best algorithm within the workspace. A problem with no
// algorithm gets a plan with err set and no descriptors.
func (b *BLASLt) makePlan(f *frame, c *ltCall) (*ltPlan, error) {
	k, l := &c.key, b.lib
	p := &ltPlan{key: *k}
	fail := func(err error) (*ltPlan, error) {
		if derr := b.destroyPlan(f, p); derr != nil {
			return nil, errors.Join(err, derr)
		}
		return nil, err
	}
	if err := b.call(f, l.descCreate, k.String(), f.outAddr(0), uintptr(k.compute), uintptr(TypeF32)); err != nil {
		return fail(err)
	}
	p.desc = uintptr(f.out[0])
	attrs := []ltAttr{{ltDescTransA, uint64(k.transA), 4}, {ltDescTransB, uint64(k.transB), 4}, {ltDescEpilogue, uint64(k.epilogue), 4}}
	if k.epilogue != ltEpilogueDefault {
		attrs = append(attrs, ltAttr{ltDescBiasDataType, uint64(k.tbias), 4}, ltAttr{ltDescBiasPointer, uint64(c.bias), 8})
	}
	for _, a := range attrs {
		if err := b.setAttr(f, l.descSetAttr, p.desc, a.attr, a.v, a.size); err != nil {
			return fail(err)
		}
	}
	ar, ac := storedShape(k.transA, k.m, k.k)
	br, bc := storedShape(k.transB, k.k, k.n)
	for _, m := range []struct {
		dst        *uintptr
		t          DataType
		rows, cols int
		ld         int
	}{{&p.la, k.ta, ar, ac, k.lda}, {&p.lb, k.tb, br, bc, k.ldb}, {&p.lc, k.tc, k.m, k.n, k.ldc}} {
		if err := b.call(f, l.layoutCreate, k.String(), f.outAddr(0), uintptr(m.t), uintptr(m.rows), uintptr(m.cols), uintptr(m.ld)); err != nil {
			return fail(err)
		}
		*m.dst = uintptr(f.out[0])
	}
	for _, a := range [...]struct {
		attr  int
		align uint32
	}{{ltPrefMinAlignmentA, k.alignA}, {ltPrefMinAlignmentB, k.alignB}, {ltPrefMinAlignmentC, k.alignC}, {ltPrefMinAlignmentD, k.alignC}} {
		if err := b.setAttr(f, l.prefSetAttr, b.pref, a.attr, uint64(a.align), 4); err != nil {
			return fail(err)
		}
	}
	f.out[1] = 0
	st, err := b.invoke(f, l.heuristic, b.h, p.desc, p.la, p.lb, p.lc, p.lc, b.pref, 1,
		uintptr(unsafe.Pointer(&p.res)), f.outAddr(1))
	runtime.KeepAlive(p)
	if err != nil {
		return fail(err)
	}
	switch {
	case st == cublasStatusNotSupported || st == cublasStatusArchMismatch:
		p.err = fmt.Errorf("cuda: %s: cuBLASLt has no algorithm for %s (%d bytes of workspace): %w",
			ltOp, k.String(), b.wsSize, newLtError(l, l.heuristic.name, st, ""))
	case st != cublasStatusSuccess:
		return fail(newLtError(l, l.heuristic.name, st, ltOp+" "+k.String()))
	case f.out32(1) < 1 || p.res.state != cublasStatusSuccess:
		p.err = notSupported(ltOp, "cuBLASLt has no algorithm for %s (%d bytes of workspace)", k.String(), b.wsSize)
	}
	if p.err != nil {
		// Only the answer is kept.
		if err := b.destroyPlan(f, p); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// ltAttr is an attribute value of a descriptor and its C size in bytes.
type ltAttr struct {
	attr int
	v    uint64
	size int
}

// destroyPlan destroys p's descriptors (those made so far).
func (b *BLASLt) destroyPlan(f *frame, p *ltPlan) error {
	var errs []error
	for _, d := range []struct {
		sym symbol
		h   *uintptr
	}{{b.lib.layoutDestroy, &p.la}, {b.lib.layoutDestroy, &p.lb}, {b.lib.layoutDestroy, &p.lc}, {b.lib.descDestroy, &p.desc}} {
		if *d.h != 0 {
			errs = append(errs, b.call(f, d.sym, "", *d.h))
			*d.h = 0
		}
	}
	return errors.Join(errs...)
}

// dropPlans destroys every plan.
func (b *BLASLt) dropPlans(f *frame) error {
	var errs []error
	for _, p := range b.plans {
		errs = append(errs, b.destroyPlan(f, p))
	}
	clear(b.plans)
	b.plans, b.last = b.plans[:0], 0
	return errors.Join(errs...)
}

// Destroy releases the plans, the preference and the handle. Destroying
// twice is a no-op. When releasing the handle fails, Destroy may be
// called again to retry it; nothing else may (the plans and preference
// are gone).
func (b *BLASLt) Destroy() error {
	if err := b.made("BLASLt.Destroy"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.destroyed {
		return nil
	}
	f := getFrame()
	defer f.release()
	err := b.dropPlans(f)
	if b.pref != 0 {
		err = errors.Join(err, b.call(f, b.lib.prefDestroy, "", b.pref))
		b.pref = 0
	}
	if err2 := b.call(f, b.lib.destroy, b.ctx.dev.String(), b.h); err2 != nil {
		b.released = true
		return errors.Join(err, err2)
	}
	b.destroyed = true
	return err
}
