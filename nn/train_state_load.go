package nn

import (
	"errors"
	"fmt"

	st "github.com/nlpodyssey/safetensors"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// fileTensor is a tensor of a safetensors file as its bytes lie in the
// file read into host memory: no device holds it until it is copied.
type fileTensor struct {
	dt    tensor.DType
	shape []int
	data  []byte // little-endian elements
}

func (f fileTensor) numel() int { return len(f.data) / f.dt.Size() }

// readFileTensors reads the safetensors file at path into host memory
// and returns its tensors, refusing what tensor.ReadSafetensors refuses
// with the same errors (its checks are those of the header, the size and
// the dtypes), but without making a tensor of any: LoadTrainState copies
// them to their devices a chunk at a time (stager), where reading them
// onto a device first held the state there twice.
func readFileTensors(path string) (map[string]fileTensor, map[string]string, error) {
	buf, err := tensor.ReadSafetensorsFile(path) // the data only when the header describes the file's size
	if errors.Is(err, atomicfile.ErrNotRegular) {
		return nil, nil, fmt.Errorf("tensor: reading safetensors: %w: %w", err, tensor.ErrArgument)
	} else if errors.Is(err, tensor.ErrArgument) || errors.Is(err, memory.ErrOutOfMemory) {
		return nil, nil, err
	} else if err != nil {
		return nil, nil, fmt.Errorf("tensor: reading safetensors: %w", err)
	}
	// ReadMetadata checks the header's length and the tensors' offsets
	// against the data (each tensor's bytes are its shape's in its dtype).
	n, md, err := st.ReadMetadata(buf)
	if err != nil {
		return nil, nil, fmt.Errorf("tensor: safetensors %s: bad header: %w", path, err)
	}
	hdr, data := buf[8:8+n], buf[8+n:]
	if err := tensor.CheckParsedSafetensorsHeader(path, hdr, md); err != nil {
		return nil, nil, err
	}
	infos := md.Tensors()
	out := make(map[string]fileTensor, len(infos))
	for name, info := range infos {
		dt, err := tensor.ParseDType(info.DType.String())
		if err != nil {
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q has unsupported dtype %v: %w", path, name, info.DType, tensor.ErrDType)
		}
		shape, err := tensor.SafetensorsShape(info.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q: %w", path, name, err)
		}
		b := data[info.DataOffsets[0]:info.DataOffsets[1]]
		if !sizeIs(shape, dt.Size(), len(b)) { // ReadMetadata's check, kept where a copy relies on it
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q: %d bytes for %v %v: %w", path, name, len(b), dt, shape, tensor.ErrShape)
		}
		out[name] = fileTensor{dt: dt, shape: shape, data: b}
	}
	return out, md.Metadata(), nil
}

// sizeIs reports whether shape's elements of size bytes are n bytes, the
// product checked without overflowing.
func sizeIs(shape []int, size, n int) bool {
	left := n
	for _, d := range shape {
		if d == 0 {
			return n == 0
		}
		if left%d != 0 {
			return false
		}
		left /= d
	}
	return left == size
}

// trainStateChunk bounds a staging buffer's bytes: a tensor larger than
// this is loaded in chunks of it (a variable for tests).
var trainStateChunk = 16 << 20

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
// a device holds is a buffer of at most trainStateChunk bytes (or the
// largest tensor's), where reading the file onto a device held all of
// it. The buffers are allocated before anything is copied, so that the
// copies into a model allocate nothing and cannot run out of memory
// halfway.
type stager struct {
	c     *tensor.Ctx
	bufs  map[stageKey]*stageBuf
	whole map[string]*tensor.Tensor // uploaded whole, by name in the file
}

func newStager(c *tensor.Ctx) *stager {
	return &stager{c: c, bufs: map[stageKey]*stageBuf{}, whole: map[string]*tensor.Tensor{}}
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
	b.n = max(b.n, min(n, max(1, trainStateChunk/f.dt.Size())))
}

// allocate allocates the buffers plan asked for; release frees them.
func (s *stager) allocate() error {
	for k, b := range s.bufs {
		t, err := s.c.New(k.dev, k.dt, memory.RoleStaging, b.n)
		if err != nil {
			return err
		}
		t.SetLabel("training state staging")
		if h := stagingHost(t); len(h) == b.n*k.dt.Size() {
			b.buf, b.host = t, h
			continue
		}
		// Not writable by the host (a policy that puts RoleStaging in
		// device memory): each tensor is uploaded whole, once, and kept
		// until the copies, which must not allocate (LoadTrainState's
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

// each hands fn f's elements (the file's tensor name) on dev, a flat
// tensor of f's dtype at a time, with the offset of its first element,
// until fn returns false; fn's temporaries are released after it. A
// chunk is a view of the staging buffer that the next one overwrites. A
// device without a host-writable buffer gets f uploaded whole instead
// (kept for a later each, of the copy after the checks).
func (s *stager) each(dev tensor.Device, name string, f fileTensor, fn func(t *tensor.Tensor, off int) bool) {
	n := f.numel()
	if n == 0 {
		return
	}
	b := s.bufs[stageKey{dev, f.dt}]
	if b.buf == nil {
		t := s.whole[name]
		if t == nil {
			var err error
			if t, err = s.c.FromBytes(dev, f.dt, f.data, n); err != nil {
				panic(&tensor.OpError{Op: "nn.LoadTrainState", Msg: fmt.Sprintf("%q", name), Err: err})
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
			panic(&tensor.OpError{Op: "nn.LoadTrainState", Msg: fmt.Sprintf("synchronizing %v", dev), Err: err})
		}
		copy(b.host, f.data[off*sz:(off+k)*sz])
		b.buf.MarkModified()
		more := true
		s.c.WithScope(func() { more = fn(b.buf.Narrow(0, 0, k), off) })
		if !more {
			return
		}
	}
}

// copyInto copies f (the file's tensor name) into dst, contiguous, of
// f's shape, on the device plan was told. It allocates nothing: a copy
// between tensors of one device converts the dtype as it goes.
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
