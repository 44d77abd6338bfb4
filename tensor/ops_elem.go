package tensor

// The op types and codes, UnaryOp, BinaryOp and the OpXxx constants, are
// in ops_gen.go, written from the op table (internal/ops).

// sameDevice panics unless all tensors are live and on one device.
func sameDevice(op string, ts ...*Tensor) {
	for _, t := range ts {
		t.live(op)
	}
	for _, t := range ts[1:] {
		if t.dev != ts[0].dev {
			fail(op, ErrDevice, "operands on %v and %v (tensors of two devices do not mix in one op: copy with ToDevice)", ts[0].dev, t.dev)
		}
	}
}

// sameFloat panics unless all tensors share one float dtype, naming the
// two operands whose dtypes differ, or the one that is not a float.
func sameFloat(op string, ts ...*Tensor) {
	for _, t := range ts {
		if t.dtype != ts[0].dtype {
			fail(op, ErrDType, "operands %v %v and %v %v: want one float dtype", ts[0].dtype, ts[0].shape, t.dtype, t.shape)
		}
		if !t.dtype.IsFloat() {
			fail(op, ErrDType, "%v operand %v: want a floating-point dtype", t.dtype, t.shape)
		}
	}
}

// sameArith is sameFloat for the ops that compute on their operands'
// values: arithmetic runs in float32 and float64 on every device (float16
// and bfloat16 are storage dtypes, and the operands of matrix products),
// so a half operand is refused here, before the op allocates anything,
// rather than by the backend once the outputs exist.
func sameArith(op string, ts ...*Tensor) {
	sameFloat(op, ts...)
	if dt := ts[0].dtype; dt.IsHalf() {
		fail(op, ErrDType, "%v operand %v: arithmetic runs in float32 and float64 (cast first)", dt, ts[0].shape)
	}
}

// indices panics unless t holds int32 indices (ids, targets); what names
// them in the message.
func indices(op, what string, t *Tensor) {
	if t.dtype != Int32 {
		fail(op, ErrDType, "%s are %v, want int32", what, t.dtype)
	}
}

// contigAll is contig for several operands (nil stays nil); the returned
// func releases the copies it made. When a copy fails (out of memory),
// the copies made before it are released before the panic goes on.
func contigAll(ts ...*Tensor) ([]*Tensor, func()) {
	out := make([]*Tensor, len(ts))
	var temps []*Tensor
	release := func() {
		for _, t := range temps {
			t.Release()
		}
	}
	ok := false
	defer func() {
		if !ok {
			release()
		}
	}()
	for i, t := range ts {
		if t == nil || t.IsContiguous() {
			out[i] = t
			continue
		}
		out[i] = t.Clone()
		temps = append(temps, out[i])
	}
	ok = true
	return out, release
}

// contig returns t when contiguous, else a contiguous copy; release with
// the returned func.
func contig(t *Tensor) (*Tensor, func()) {
	if t.IsContiguous() {
		return t, func() {}
	}
	c := t.Clone()
	return c, c.Release
}

// binaryFuncs are the public functions that run the binary ops, by code,
// where one's name is not the op's own (OpMax is run by Maximum: Max is
// the reduction).
var binaryFuncs = [NumBinaryOps]string{OpMax: "Maximum"}

// binaryName is the name a binary op's errors give (and the op its
// outputs record as made by them): the public function that runs it, as
// the user called it (Maximum, not Max), for Binary with the op's code as
// for the function itself; the op's own name for an op without a function
// of its own (Binary(OpMin, ...) names Min) and for no op at all.
func binaryName(op BinaryOp) string {
	if op < NumBinaryOps && binaryFuncs[op] != "" {
		return binaryFuncs[op]
	}
	return op.String()
}

// Binary applies op elementwise with NumPy broadcasting and returns a new
// contiguous tensor. Panics on mismatched devices, dtypes or shapes, with
// an *OpError naming the public function that runs op (tensor.Maximum for
// OpMax), or op itself where it has none (tensor.Min).
func Binary(op BinaryOp, a, b *Tensor) *Tensor {
	name := binaryName(op)
	if op >= NumBinaryOps {
		fail(name, ErrArgument, "no such binary op")
	}
	sameDevice(name, a, b)
	sameArith(name, a, b)
	shape, problem := broadcast(a.shape, b.shape)
	if problem != "" {
		fail(name, ErrShape, "%s", problem)
	}
	l := mergeDims(name, shape, broadcastStrides(a, shape), broadcastStrides(b, shape))
	out := mustNew(name, ctxOf(name, a, b), a.dev, a.dtype, shape)
	defer releaseOnPanic(out) // a layout the device's kernels refuse (CUDA: more than 8 merged dims)
	a.dev.backend().binary(op, out, a, b, l)
	return out
}

// Add returns a + b (broadcasting).
func Add(a, b *Tensor) *Tensor { return Binary(OpAdd, a, b) }

// Sub returns a - b (broadcasting).
func Sub(a, b *Tensor) *Tensor { return Binary(OpSub, a, b) }

// Mul returns a * b elementwise (broadcasting).
func Mul(a, b *Tensor) *Tensor { return Binary(OpMul, a, b) }

// Div returns a / b elementwise (broadcasting).
func Div(a, b *Tensor) *Tensor { return Binary(OpDiv, a, b) }

// Maximum returns max(a, b) elementwise (broadcasting).
func Maximum(a, b *Tensor) *Tensor { return Binary(OpMax, a, b) }

// Unary applies op elementwise and returns a new tensor.
func Unary(op UnaryOp, t *Tensor) *Tensor {
	name := op.String()
	if op >= NumUnaryOps {
		fail(name, ErrArgument, "no such unary op")
	}
	t.live(name)
	sameArith(name, t)
	src, done := contig(t)
	defer done()
	out := mustNew(name, ctxOf(name, t), t.dev, t.dtype, t.shape)
	t.dev.backend().unary(op, out, src)
	return out
}

// UnaryTo is Unary(op, t).To(dt) in one pass: op computed in float32,
// the result rounded to dt as Cast rounds, for float32 t and a float16
// or bfloat16 dt (dt equal to t's dtype is Unary). Bit for bit the two
// ops' result, without the float32 intermediate: the GELU before a
// half-precision product (autograd.GeluLinear under autocast). A half t
// with dt its own dtype is op of t widened to float32, rounded back (the
// GELU of a half-precision product).
func UnaryTo(op UnaryOp, t *Tensor, dt DType) *Tensor {
	name := op.String()
	if op >= NumUnaryOps {
		fail(name, ErrArgument, "no such unary op")
	}
	t.live(name)
	if dt == t.dtype && !dt.IsHalf() {
		return Unary(op, t)
	}
	if !dt.IsHalf() || (t.dtype != Float32 && t.dtype != dt) {
		fail(name, ErrDType, "%v of %v to %v: want float32 to float16 or bfloat16, or a half type to itself", op, t.dtype, dt)
	}
	src, done := contig(t)
	defer done()
	out := mustNew(name, ctxOf(name, t), t.dev, dt, t.shape)
	defer releaseOnPanic(out) // the backend's float32 temporary may fail (out of memory)
	t.dev.backend().unaryTo(op, out, src)
	return out
}

// UnaryBackward returns dy * op'(x), given the forward input x and output
// y (either may be nil when op does not need it; the kernel documents
// which it uses).
func UnaryBackward(op UnaryOp, x, y, dy *Tensor) *Tensor {
	return UnaryBackwardTo(op, x, y, dy, dyDType(dy))
}

// dyDType is dy's dtype, or Float32 for a nil dy (UnaryBackwardTo names
// the missing operand).
func dyDType(dy *Tensor) DType {
	if dy == nil {
		return Float32
	}
	return dy.dtype
}

// UnaryBackwardTo is UnaryBackward(op, x, y, dy).To(dt) in one pass: the
// gradient computed in float32 and rounded to dt as Cast rounds, for
// float32 operands and a float16 or bfloat16 dt (dt equal to dy's dtype
// is UnaryBackward). Bit for bit the two ops' result, without the float32
// intermediate: the GELU gradient that feeds only a half-precision
// product (autograd.GeluLinear's backward under autocast). The saved x
// and y may also be in dt itself (the GELU of a half-precision product):
// they are widened as they are read.
func UnaryBackwardTo(op UnaryOp, x, y, dy *Tensor, dt DType) *Tensor {
	name := op.String() + "Backward"
	if op >= NumUnaryOps {
		fail(name, ErrArgument, "no such unary op")
	}
	if dy == nil {
		fail(name, ErrArgument, "nil output gradient dy")
	}
	if usesX, usesY := op.BackwardUses(); (usesX && x == nil) || (usesY && y == nil) {
		fail(name, ErrArgument, "the backward of %v needs the saved input (%v) and output (%v)", op, usesX, usesY)
	}
	ts := []*Tensor{dy}
	if x != nil {
		ts = append(ts, x)
	}
	if y != nil {
		ts = append(ts, y)
	}
	sameDevice(name, ts...)
	sameArith(name, dy)
	if dt != dy.dtype && (dy.dtype != Float32 || !dt.IsHalf()) {
		fail(name, ErrDType, "gradient of %v in %v: want float32 to float16 or bfloat16", dy.dtype, dt)
	}
	saved := ts[1:]
	for _, s := range saved {
		if s.dtype != saved[0].dtype || (s.dtype != dy.dtype && !(s.dtype == dt && dt != dy.dtype)) {
			fail(name, ErrDType, "saved %v with a %v gradient to %v: want dy's dtype, or the half type of the result", s.dtype, dy.dtype, dt)
		}
	}
	for _, t := range ts[1:] {
		if !shapeEq(t.shape, dy.shape) {
			fail(name, ErrShape, "dy %v vs saved %v", dy.shape, t.shape)
		}
	}
	cs, release := contigAll(x, y, dy)
	defer release()
	cx, cy, cdy := cs[0], cs[1], cs[2]
	out := mustNew(name, ctxOf(name, x, y, dy), dy.dev, dt, dy.shape)
	defer releaseOnPanic(out) // the backend's float32 temporary may fail (out of memory)
	if dt == dy.dtype {
		dy.dev.backend().unaryBackward(op, out, cx, cy, cdy)
	} else {
		dy.dev.backend().unaryBackwardTo(op, out, cx, cy, cdy)
	}
	return out
}

// Neg returns -t.
func Neg(t *Tensor) *Tensor { return Unary(OpNeg, t) }

// Exp returns e^t.
func Exp(t *Tensor) *Tensor { return Unary(OpExp, t) }

// Log returns ln t.
func Log(t *Tensor) *Tensor { return Unary(OpLog, t) }

// Sqrt returns √t.
func Sqrt(t *Tensor) *Tensor { return Unary(OpSqrt, t) }

// Tanh returns tanh t.
func Tanh(t *Tensor) *Tensor { return Unary(OpTanh, t) }

// Gelu returns the tanh approximation of GELU (PyTorch's approximate="tanh").
func Gelu(t *Tensor) *Tensor { return Unary(OpGelu, t) }

// Relu returns max(t, 0).
func Relu(t *Tensor) *Tensor { return Unary(OpRelu, t) }

// Silu returns t·sigmoid(t) (SiLU, PyTorch's F.silu).
func Silu(t *Tensor) *Tensor { return Unary(OpSilu, t) }

// Affine returns alpha*t + beta.
func Affine(t *Tensor, alpha, beta float64) *Tensor {
	t.live("Affine")
	sameArith("Affine", t)
	src, done := contig(t)
	defer done()
	out := mustNew("Affine", ctxOf("Affine", t), t.dev, t.dtype, t.shape)
	t.dev.backend().affine(out, src, alpha, beta)
	return out
}

// Scale returns alpha*t.
func Scale(t *Tensor, alpha float64) *Tensor { return Affine(t, alpha, 0) }

// AddScalar returns t + c.
func AddScalar(t *Tensor, c float64) *Tensor { return Affine(t, 1, c) }

// Fill sets every element of contiguous t to v, in place.
func (t *Tensor) Fill(v float64) {
	t.live("Fill")
	if !t.IsContiguous() {
		fail("Fill", ErrArgument, "tensor must be contiguous (strides %v)", t.strides)
	}
	modified(t)
	t.dev.backend().fill(t, v)
}

// AddInPlace performs t += u (same shape, dtype and device; t contiguous).
// u may view t's storage: it is added as it was before the op.
func (t *Tensor) AddInPlace(u *Tensor) {
	sameDevice("AddInPlace", t, u)
	sameArith("AddInPlace", t, u)
	if !t.IsContiguous() {
		fail("AddInPlace", ErrArgument, "destination %v must be contiguous (strides %v)", t.shape, t.strides)
	}
	if !shapeEq(t.shape, u.shape) {
		fail("AddInPlace", ErrShape, "destination %v, source %v", t.shape, u.shape)
	}
	if u.SharesStorage(t) && !(u.offset == t.offset && u.IsContiguous()) {
		// The kernel may write an element of t before reading it through
		// u (x[1:] += x[:-1], t += t.T()): add a copy.
		u = u.Clone()
		defer u.Release()
	}
	modified(t)
	t.dev.backend().binary(OpAdd, t, t, u, mergeDims("AddInPlace", t.shape, t.strides, u.strides))
}

// ScaleInPlace multiplies contiguous t by alpha, in place.
func (t *Tensor) ScaleInPlace(alpha float64) {
	t.live("ScaleInPlace")
	sameArith("ScaleInPlace", t)
	if !t.IsContiguous() {
		fail("ScaleInPlace", ErrArgument, "tensor must be contiguous (strides %v)", t.strides)
	}
	modified(t)
	t.dev.backend().affine(t, t, alpha, 0)
}
