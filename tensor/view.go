package tensor

import (
	"slices"
)

// Reshape returns a tensor with the same elements in a new shape. One
// dimension may be -1 (inferred). It is a view when t is contiguous and a
// copy otherwise. Panics with ErrShape when the sizes disagree.
func (t *Tensor) Reshape(shape ...int) *Tensor {
	t.live("Reshape")
	shape = inferShape("Reshape", t, shape)
	if t.IsContiguous() {
		return t.view("Reshape", shape, contiguousStrides(shape), t.offset)
	}
	c := t.Contiguous()
	v := c.view("Reshape", shape, contiguousStrides(shape), c.offset)
	c.Release()
	return v
}

func inferShape(op string, t *Tensor, shape []int) []int {
	shape = slices.Clone(shape)
	known, infer := slices.Clone(shape), -1 // known: the -1 as 1
	for i, d := range shape {
		switch {
		case d == -1 && infer < 0:
			infer, known[i] = i, 1
		case d < 0:
			fail(op, ErrShape, "bad dimension %d in %v", d, shape)
		}
	}
	// As a new tensor's shape: also its nonzero dimensions beside a 0
	// must not multiply past 2^62 (the view's strides are their products).
	if _, problem := elements(known, t.dtype); problem != "" {
		fail(op, ErrShape, "%s", problem)
	}
	n := numel(known)
	total := t.Numel()
	if infer >= 0 {
		if n == 0 || total%n != 0 {
			fail(op, ErrShape, "cannot infer -1 in %v for %d elements (from %v)", shape, total, t.shape)
		}
		shape[infer] = total / n
		n = total
	}
	if n != total {
		fail(op, ErrShape, "cannot reshape %v (%d elements) to %v (%d elements)", t.shape, total, shape, n)
	}
	return shape
}

// Transpose swaps two axes (negative axes count from the end). It is a view.
func (t *Tensor) Transpose(a, b int) *Tensor {
	t.live("Transpose")
	a, b = t.axis("Transpose", a), t.axis("Transpose", b)
	sh, st := slices.Clone(t.shape), slices.Clone(t.strides)
	sh[a], sh[b] = sh[b], sh[a]
	st[a], st[b] = st[b], st[a]
	return t.view("Transpose", sh, st, t.offset)
}

// T is Transpose(-2, -1).
func (t *Tensor) T() *Tensor { return t.Transpose(-2, -1) }

// Permute reorders the axes: result axis i is t's axis perm[i] (negative
// axes count from the end; each axis once). A view.
func (t *Tensor) Permute(perm ...int) *Tensor {
	t.live("Permute")
	if len(perm) != len(t.shape) {
		fail("Permute", ErrShape, "permutation %v for shape %v", perm, t.shape)
	}
	seen := make([]bool, len(perm))
	sh, st := make([]int, len(perm)), make([]int, len(perm))
	for i, p := range perm {
		p = t.axis("Permute", p)
		if seen[p] {
			fail("Permute", ErrShape, "axis %d repeated in %v", p, perm)
		}
		seen[p] = true
		sh[i], st[i] = t.shape[p], t.strides[p]
	}
	return t.view("Permute", sh, st, t.offset)
}

// Narrow returns elements [start, start+length) along axis (negative
// axes count from the end; start and length do not). A view.
func (t *Tensor) Narrow(axis, start, length int) *Tensor {
	t.live("Narrow")
	axis = t.axis("Narrow", axis)
	if start < 0 || length < 0 || start > t.shape[axis]-length {
		fail("Narrow", ErrShape, "%d elements from %d out of bounds for axis %d of %v", length, start, axis, t.shape)
	}
	sh := slices.Clone(t.shape)
	sh[axis] = length
	offset := t.offset + start*t.strides[axis]
	if numel(sh) == 0 {
		// An empty view has no element to start at: it keeps t's offset,
		// which lies within the storage, where start's could lie past
		// its end (the last rows of a matrix's last columns) and the
		// host kernels' slices of it would go out of range.
		offset = t.offset
	}
	return t.view("Narrow", sh, slices.Clone(t.strides), offset)
}

// Split cuts axis (negative counts from the end) into pieces of the given
// size (the last may be shorter). Each piece is a view. An empty axis
// gives one empty piece, as torch.split does.
func (t *Tensor) Split(size, axis int) []*Tensor {
	t.live("Split")
	axis = t.axis("Split", axis)
	if size <= 0 {
		fail("Split", ErrArgument, "split size %d", size)
	}
	if t.shape[axis] == 0 {
		return []*Tensor{t.Narrow(axis, 0, 0)}
	}
	var out []*Tensor
	for s := 0; s < t.shape[axis]; s += size {
		out = append(out, t.Narrow(axis, s, min(size, t.shape[axis]-s)))
	}
	return out
}

// Expand broadcasts size-1 dimensions to shape (stride 0). A view.
func (t *Tensor) Expand(shape ...int) *Tensor {
	t.live("Expand")
	b, err := BroadcastShapes(t.shape, shape)
	if err != nil || !shapeEq(b, shape) || slices.ContainsFunc(shape, func(d int) bool { return d < 0 }) {
		fail("Expand", ErrShape, "cannot expand %v to %v", t.shape, shape)
	}
	// A view counts its elements and bytes in an int as any tensor does
	// (Numel, Bytes): they must not wrap around.
	if _, problem := elements(shape, t.dtype); problem != "" {
		fail("Expand", ErrShape, "%s", problem)
	}
	return t.view("Expand", slices.Clone(shape), broadcastStrides(t, shape), t.offset)
}

// Unsqueeze inserts a size-1 axis at position axis (0..Rank; negative
// axes -Rank-1..-1 count from the end, -1 appending one, as in PyTorch).
// A view.
func (t *Tensor) Unsqueeze(axis int) *Tensor {
	t.live("Unsqueeze")
	given := axis
	if axis < 0 {
		axis += len(t.shape) + 1
	}
	if axis < 0 || axis > len(t.shape) {
		fail("Unsqueeze", ErrShape, "axis %d for shape %v", given, t.shape)
	}
	stride := 1
	if axis < len(t.shape) {
		stride = t.strides[axis] * t.shape[axis]
	}
	sh := slices.Insert(slices.Clone(t.shape), axis, 1)
	st := slices.Insert(slices.Clone(t.strides), axis, stride)
	return t.view("Unsqueeze", sh, st, t.offset)
}

// Squeeze removes axis (negative counts from the end), which must have
// size 1. A view.
func (t *Tensor) Squeeze(axis int) *Tensor {
	t.live("Squeeze")
	axis = t.axis("Squeeze", axis)
	if t.shape[axis] != 1 {
		fail("Squeeze", ErrShape, "axis %d of %v is not 1", axis, t.shape)
	}
	sh := slices.Delete(slices.Clone(t.shape), axis, axis+1)
	st := slices.Delete(slices.Clone(t.strides), axis, axis+1)
	return t.view("Squeeze", sh, st, t.offset)
}

// Contiguous returns t itself as a new view when it is already contiguous,
// else a contiguous copy. Either way the result is a new tensor to release.
func (t *Tensor) Contiguous() *Tensor {
	t.live("Contiguous")
	if t.IsContiguous() {
		return t.view("Contiguous", slices.Clone(t.shape), slices.Clone(t.strides), t.offset)
	}
	return t.Clone()
}

// Clone returns a contiguous copy that shares nothing with t.
func (t *Tensor) Clone() *Tensor {
	t.live("Clone")
	l := mergeDims("Clone", t.shape, t.strides)
	out := mustNew("Clone", ctxOf("Clone", t), t.dev, t.dtype, t.shape)
	defer releaseOnPanic(out) // a layout the device's kernels refuse (CUDA: more than 8 merged dims)
	t.dev.backend().copyStrided(out, t, l)
	return out
}

// CopyFrom copies src's elements into t (same shape; dtypes are
// converted; devices may differ). t must be contiguous. src may view t's
// storage: its values from before the copy are copied.
func (t *Tensor) CopyFrom(src *Tensor) {
	t.live("CopyFrom")
	src.live("CopyFrom")
	if !shapeEq(t.shape, src.shape) {
		fail("CopyFrom", ErrShape, "destination %v, source %v", t.shape, src.shape)
	}
	if !t.IsContiguous() {
		fail("CopyFrom", ErrArgument, "destination must be contiguous (strides %v)", t.strides)
	}
	s := src
	if s.dev != t.dev {
		s = s.ToDevice(t.dev)
		defer s.Release()
	}
	if s.SharesStorage(t) { // the copy kernels' dst must not overlap their src
		if s.dtype == t.dtype && s.offset == t.offset && slices.Equal(s.strides, t.strides) {
			return // t itself
		}
		s = s.Clone()
		defer s.Release()
	}
	modified(t)
	switch {
	case s.IsContiguous(): // cast converts as it copies
		t.dev.backend().cast(t, s)
	case s.dtype == t.dtype:
		t.dev.backend().copyStrided(t, s, mergeDims("CopyFrom", s.shape, s.strides))
	default:
		c := s.Contiguous()
		t.dev.backend().cast(t, c)
		c.Release()
	}
}

// To returns t converted to dtype dt (a new contiguous tensor; a view of t
// when dt is already t's dtype and t is contiguous), the same on every
// device. Floats convert to the nearest value of dt (ties to even);
// float64 and int32 go to float16 and bfloat16 through float32 (as in
// PyTorch), which may round twice. Floats convert to int32 truncated
// toward zero and saturated: values beyond int32's range give its
// limits and NaN gives 0, where PyTorch's result is undefined
// (torch.tensor([3e9]).int() is -2147483648 on x86).
func (t *Tensor) To(dt DType) *Tensor {
	t.live("To")
	if dt == t.dtype {
		return t.Contiguous()
	}
	src := t
	if !t.IsContiguous() {
		src = t.Contiguous()
		defer src.Release()
	}
	out := mustNew("To", ctxOf("To", t), t.dev, dt, t.shape)
	defer releaseOnPanic(out) // a cast kernel the device refuses (a launch error, a layout)
	t.dev.backend().cast(out, src)
	return out
}

// ToDevice copies t to dev (a view of t when it already lives there).
// Between the CPU and a GPU the bytes go straight from one tensor's memory
// to the other's; between two GPUs through one host buffer of at most
// toDeviceChunk bytes, a chunk at a time: the copy never holds the whole
// tensor in Go memory outside the memory managers' budgets.
func (t *Tensor) ToDevice(dev Device) *Tensor {
	t.live("ToDevice")
	if dev == t.dev {
		return t.Contiguous()
	}
	src := t.Contiguous()
	defer src.Release()
	out := mustNew("ToDevice", ctxOf("ToDevice", t), dev, t.dtype, t.shape)
	defer releaseOnPanic(out) // a copy that fails (a driver error, or refused during a graph capture)
	if err := t.dev.Synchronize(); err != nil {
		fail("ToDevice", err, "synchronizing %v", t.dev)
	}
	switch {
	case t.dev.Kind() == KindCPU:
		dev.backend().upload(out, hostData[byte](byteView(src)))
	case dev.Kind() == KindCPU:
		t.dev.backend().download(hostData[byte](byteView(out)), src)
	default:
		copyThroughHost(out, src)
	}
	return out
}

// toDeviceChunk bounds the host buffer of a copy between two devices
// neither of which is the CPU (a variable for tests).
var toDeviceChunk = 16 << 20

// copyThroughHost copies contiguous src into contiguous out of the same
// dtype and size on another device, through a host buffer of at most
// toDeviceChunk bytes.
func copyThroughHost(out, src *Tensor) {
	n, sz := src.Numel(), src.dtype.Size()
	if n == 0 {
		return
	}
	per := max(1, toDeviceChunk/sz)
	buf := make([]byte, min(n, per)*sz)
	fs, fo := src.Reshape(n), out.Reshape(n)
	defer fs.Release()
	defer fo.Release()
	for start := 0; start < n; start += per {
		l := min(per, n-start)
		s, o := fs.Narrow(0, start, l), fo.Narrow(0, start, l)
		src.dev.backend().download(buf[:l*sz], s)
		out.dev.backend().upload(o, buf[:l*sz])
		s.Release()
		o.Release()
	}
}

// Alias returns a new tensor viewing exactly what t views (same shape,
// strides and storage). It never copies; releasing one leaves the other
// usable. Autograd uses it to hold its own reference to a value.
func (t *Tensor) Alias() *Tensor {
	t.live("Alias")
	return t.view("Alias", slices.Clone(t.shape), slices.Clone(t.strides), t.offset)
}

// WriteNarrow copies src into elements [start, start+src.Dim(axis)) of
// axis (negative counts from the end) of t, in place: the inverse of
// Narrow. t must be contiguous; src must match t's shape except along
// axis. src may view t's storage: its values from before the write are
// copied.
func (t *Tensor) WriteNarrow(axis, start int, src *Tensor) {
	op := "WriteNarrow"
	sameDevice(op, t, src)
	if t.dtype != src.dtype {
		fail(op, ErrDType, "destination %v, source %v", t.dtype, src.dtype)
	}
	axis = t.axis(op, axis)
	if !t.IsContiguous() {
		fail(op, ErrArgument, "destination %v must be contiguous (strides %v)", t.shape, t.strides)
	}
	ok := src.Rank() == t.Rank()
	for i := range t.shape {
		if ok && i != axis && t.shape[i] != src.shape[i] {
			ok = false
		}
	}
	if !ok || start < 0 || start > t.shape[axis]-src.shape[axis] {
		fail(op, ErrShape, "cannot write %v at %d along axis %d of %v", src.shape, start, axis, t.shape)
	}
	c, done := contig(src)
	if c.SharesStorage(t) { // a row copied early would overwrite rows still to read
		c = src.Clone()
		done = c.Release
	}
	defer done()
	inner := numel(t.shape[axis+1:])
	rows := numel(t.shape[:axis])
	w := src.shape[axis] * inner
	modified(t)
	if rows*w > 0 {
		t.dev.backend().copy2D(t, c, rows, w, t.shape[axis]*inner, start*inner, w, 0)
	}
}

// Concat joins tensors of one dtype and device along axis (negative
// counts from the end); their other dimensions must agree.
func Concat(axis int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		fail("Concat", ErrArgument, "no tensors")
	}
	sameDevice("Concat", ts...)
	axis = ts[0].axis("Concat", axis)
	shape := slices.Clone(ts[0].shape)
	shape[axis] = 0
	// Every operand is checked before the output exists, so a bad one
	// neither leaks it nor fails halfway through the copies.
	for _, t := range ts {
		if t.dtype != ts[0].dtype {
			fail("Concat", ErrDType, "operands %v and %v", ts[0].dtype, t.dtype)
		}
		ok := t.Rank() == len(shape)
		for i := 0; ok && i < len(shape); i++ {
			ok = i == axis || t.shape[i] == ts[0].shape[i]
		}
		if !ok {
			fail("Concat", ErrShape, "operands %v and %v differ off axis %d", ts[0].shape, t.shape, axis)
		}
		if shape[axis] > 1<<62-t.shape[axis] { // broadcast views (Expand) can be that long
			fail("Concat", ErrShape, "%d operands of %v along axis %d: more elements than memory can address", len(ts), ts[0].shape, axis)
		}
		shape[axis] += t.shape[axis]
	}
	out := mustNew("Concat", ctxOf("Concat", ts...), ts[0].dev, ts[0].dtype, shape)
	defer releaseOnPanic(out) // a copy of a strided operand may fail (out of memory)
	at := 0
	for _, t := range ts {
		out.WriteNarrow(axis, at, t)
		at += t.shape[axis]
	}
	return out
}
