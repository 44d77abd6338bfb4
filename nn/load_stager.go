package nn

import (
	"fmt"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// loadChunk bounds a staging buffer's bytes (LoadTrainState's and
// LoadWeights'): a tensor larger than this is loaded in chunks of it (a
// variable for tests).
var loadChunk = 16 << 20

// stagingHost is the host's view of staging buffer t's bytes, nil where
// the host cannot write them (a variable for tests).
var stagingHost = func(t *tensor.Tensor) []byte { return t.Allocation().Host() }

// stageKey is what a staging buffer serves: a copy on a device from a
// file's tensors of one dtype (a copy converts as it goes, but only
// between tensors of one device).
type stageKey struct {
	dev tensor.Device
	dt  tensor.DType
}

// stageBuf is a flat staging buffer of n elements and the host's view of
// its bytes; buf is nil for a device whose staging memory the host cannot
// write (stager.each then uploads a tensor whole).
type stageBuf struct {
	n    int
	buf  *tensor.Tensor
	host []byte
}

// stager moves a file's tensors (in host memory) to the devices a chunk
// at a time, through a staging buffer (memory.RoleStaging: mapped pinned
// memory on a GPU, which its kernels read over the bus) per device and
// dtype, the host writing each chunk where the device reads it: the extra
// a device holds is a buffer of at most loadChunk bytes (or the largest
// tensor's), where reading the file onto a device held all of it. The
// buffers are allocated before anything is copied, so that the copies
// into a model allocate nothing and cannot run out of memory halfway.
type stager struct {
	c     *tensor.Ctx
	op    string // the loader, for errors and the buffers' label
	bufs  map[stageKey]*stageBuf
	whole map[string]*tensor.Tensor // uploaded whole, by name in the file
}

func newStager(c *tensor.Ctx, op string) *stager {
	return &stager{c: c, op: op, bufs: map[stageKey]*stageBuf{}, whole: map[string]*tensor.Tensor{}}
}

// plan notes that f is to be loaded onto dev.
func (s *stager) plan(dev tensor.Device, f fileTensor) {
	n := f.numel()
	if n == 0 {
		return
	}
	k := stageKey{dev, f.dt}
	b := s.bufs[k]
	if b == nil {
		b = &stageBuf{}
		s.bufs[k] = b
	}
	b.n = max(b.n, min(n, max(1, loadChunk/f.dt.Size())))
}

// allocate allocates the buffers plan asked for; release frees them.
func (s *stager) allocate() error {
	for k, b := range s.bufs {
		t, err := s.c.New(k.dev, k.dt, memory.RoleStaging, b.n)
		if err != nil {
			return err
		}
		t.SetLabel(s.op + " staging")
		if h := stagingHost(t); len(h) == b.n*k.dt.Size() {
			b.buf, b.host = t, h
			continue
		}
		// Not writable by the host (a policy that puts RoleStaging in
		// device memory): each tensor is uploaded whole, once, and kept
		// until the copies, which must not allocate (the loaders'
		// all-or-nothing promise).
		t.Release()
	}
	return nil
}

// release frees the buffers once the device is done reading them.
func (s *stager) release() {
	for k, b := range s.bufs {
		if b.buf != nil {
			_ = k.dev.Synchronize() // a failure here is the device's, which its next op reports
			b.buf.Release()
		}
	}
}

// each hands fn f's elements (the file's tensor name) on dev, in the
// order they are loaded in (fileTensor.put), a flat tensor of f's dtype
// at a time, with the offset of its first element, until fn returns
// false; fn's temporaries are released after it. A chunk is a view of
// the staging buffer that the next one overwrites. A device without a
// host-writable buffer gets f uploaded whole instead (kept for a later
// each, of the copy after the checks).
func (s *stager) each(dev tensor.Device, name string, f fileTensor, fn func(t *tensor.Tensor, off int) bool) {
	n := f.numel()
	if n == 0 {
		return
	}
	b := s.bufs[stageKey{dev, f.dt}]
	if b.buf == nil {
		t := s.whole[name]
		if t == nil {
			data := f.data
			if f.transposed { // a host copy of one tensor, for as long as the upload
				data = make([]byte, len(f.data))
				f.put(data, 0)
			}
			var err error
			if t, err = s.c.FromBytes(dev, f.dt, data, n); err != nil {
				panic(&tensor.OpError{Op: s.op, Msg: fmt.Sprintf("%q", name), Err: err})
			}
			s.whole[name] = t
		}
		s.c.WithScope(func() { fn(t, 0) })
		return
	}
	sz := f.dt.Size()
	for off := 0; off < n; off += b.n {
		k := min(b.n, n-off)
		// The device may still be reading the previous chunk.
		if err := dev.Synchronize(); err != nil {
			panic(&tensor.OpError{Op: s.op, Msg: fmt.Sprintf("synchronizing %v", dev), Err: err})
		}
		f.put(b.host[:k*sz], off)
		b.buf.MarkModified()
		more := true
		s.c.WithScope(func() { more = fn(b.buf.Narrow(0, 0, k), off) })
		if !more {
			return
		}
	}
}

// copyInto copies f (the file's tensor name) into dst, contiguous, of
// the shape f is loaded in, on the device plan was told. It allocates
// nothing: a copy between tensors of one device converts the dtype as
// it goes.
func (s *stager) copyInto(dst *tensor.Tensor, name string, f fileTensor) {
	flat := dst.Reshape(dst.Numel()) // a view: dst is contiguous
	defer flat.Release()
	s.each(dst.Device(), name, f, func(t *tensor.Tensor, off int) bool {
		d := flat.Narrow(0, off, t.Numel())
		defer d.Release()
		d.CopyFrom(t)
		return true
	})
}
