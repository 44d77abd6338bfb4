package tensor

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	st "github.com/nlpodyssey/safetensors"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/memory"
)

// stView adapts a host copy of a tensor to the safetensors writer.
type stView struct {
	dt    st.DType
	shape []uint64
	data  []byte
}

func (v stView) DType() st.DType { return v.dt }
func (v stView) Shape() []uint64 { return v.shape }
func (v stView) Data() []byte    { return v.data }
func (v stView) DataLen() uint64 { return uint64(len(v.data)) }

// WriteSafetensors saves tensors under their names, with string metadata,
// in the safetensors format (readable by PyTorch and Hugging Face tools).
// Names and metadata must be valid UTF-8, and no tensor may be named
// "__metadata__" (the header's entry for the metadata): such input is an
// error wrapping ErrArgument. It is WriteSafetensorsContext with a context
// that is never cancelled.
func WriteSafetensors(path string, tensors map[string]*Tensor, meta map[string]string) error {
	return WriteSafetensorsContext(context.Background(), path, tensors, meta)
}

// WriteSafetensorsContext saves tensors as WriteSafetensors does, atomically
// and durably: the bytes go to a temporary file in path's directory, which
// is synced and renamed over path, and the directory is synced; a reader
// sees the old file or the whole new one. On any failure, or when ctx is
// cancelled during the write (an interrupt), the temporary file is removed
// and path is left as it was.
func WriteSafetensorsContext(ctx context.Context, path string, tensors map[string]*Tensor, meta map[string]string) error {
	for k, v := range meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("tensor: safetensors %s: metadata %q: %q is not valid UTF-8: %w", path, k, v, ErrArgument)
		}
	}
	views := make(map[string]stView, len(tensors))
	for _, name := range slices.Sorted(maps.Keys(tensors)) {
		t := tensors[name]
		if name == stMetadataKey || !utf8.ValidString(name) {
			return fmt.Errorf("tensor: safetensors %s: tensor name %q is %s or not valid UTF-8: %w", path, name, stMetadataKey, ErrArgument)
		}
		if t == nil || t.Released() {
			return fmt.Errorf("tensor: safetensors %s: tensor %q is nil or released: %w", path, name, ErrArgument)
		}
		dt, err := st.ParseDType(t.dtype.SafetensorsName())
		if err != nil {
			return fmt.Errorf("tensor: safetensors %s: %q: %w", path, name, err)
		}
		shape := make([]uint64, t.Rank())
		for i, d := range t.shape {
			shape[i] = uint64(d)
		}
		var data []byte
		if err := Try(func() { data = t.RawBytes() }); err != nil {
			return fmt.Errorf("tensor: safetensors %s: %q: %w", path, name, err)
		}
		views[name] = stView{dt: dt, shape: shape, data: data}
	}
	err := atomicfile.Write(ctx, path, func(w io.Writer) error { return st.SerializeToWriter(views, meta, w) })
	if err != nil {
		return fmt.Errorf("tensor: safetensors: %w", err)
	}
	return nil
}

// ReadSafetensors is Background().ReadSafetensors.
func ReadSafetensors(path string, dev Device) (map[string]*Tensor, map[string]string, error) {
	return background.ReadSafetensors(path, dev)
}

// ReadSafetensors loads every tensor of a safetensors file onto dev. The
// returned tensors belong to c and are owned by its innermost scope, if
// any. Unsupported dtypes (anything but F64, F32, F16, BF16, I32) and
// malformed files (a header that is not valid UTF-8 or longer than
// 100,000,000 bytes among them) are errors naming the file and tensor. A
// file of another size than its header describes, cut short or with bytes
// past the tensors' data, is refused before its data is read (see
// ReadSafetensorsFile), naming both sizes and wrapping ErrArgument; so is
// a file larger than the host memory available, wrapping
// memory.ErrOutOfMemory instead. A header that gives a key twice in one
// object (a tensor name, "__metadata__", a metadata key, a key of one
// tensor's entry), which encoding/json would read with the last one
// winning, is an error naming the file and the key, wrapping ErrArgument.
func (c *Ctx) ReadSafetensors(path string, dev Device) (map[string]*Tensor, map[string]string, error) {
	entries, meta, err := ReadSafetensorsEntries(path)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]*Tensor, len(entries))
	for _, e := range entries {
		t, err := c.FromBytes(dev, e.DType, e.Data, e.Shape...)
		if err != nil {
			releaseMap(out)
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q: %w", path, e.Name, err)
		}
		out[e.Name] = t
	}
	return out, meta, nil
}

// SafetensorsEntry is one tensor of a safetensors file as its bytes lie
// in the file read into host memory (ReadSafetensorsEntries): Data is
// its elements, little-endian, Shape's in DType.
type SafetensorsEntry struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// ReadSafetensorsEntries reads the safetensors file at path into host
// memory and returns its tensors in the data's order (as st.Deserialize
// gives them) and its string metadata, refusing what ReadSafetensors
// refuses with the same errors, but without making a tensor of any: for a
// loader that copies them to their devices a piece at a time (nn's
// LoadWeights and LoadTrainState), where making each one whole on its
// device held the file there beside the tensors it loads into.
func ReadSafetensorsEntries(path string) ([]SafetensorsEntry, map[string]string, error) {
	buf, err := ReadSafetensorsFile(path) // the data only when the header describes the file's size
	if errors.Is(err, atomicfile.ErrNotRegular) {
		return nil, nil, fmt.Errorf("tensor: reading safetensors: %w: %w", err, ErrArgument)
	} else if errors.Is(err, ErrArgument) || errors.Is(err, memory.ErrOutOfMemory) {
		return nil, nil, err
	} else if err != nil {
		return nil, nil, fmt.Errorf("tensor: reading safetensors: %w", err)
	}
	// ReadMetadata parses the header (ReadSafetensorsFile parsed it once
	// before, for the size the data must have) and checks the tensors'
	// offsets against the data: st.Deserialize would parse it yet again
	// only to keep buf's data with it.
	n, md, err := st.ReadMetadata(buf)
	if err != nil {
		return nil, nil, fmt.Errorf("tensor: safetensors %s: bad header: %w", path, err)
	}
	hdr, data := buf[8:8+n], buf[8+n:]
	if err := CheckParsedSafetensorsHeader(path, hdr, md); err != nil {
		return nil, nil, err
	}
	infos := md.Tensors()
	// In the data's order, as st.Deserialize gives them: the first
	// tensor refused is the same on every read.
	names := slices.Collect(maps.Keys(infos))
	slices.SortFunc(names, func(a, b string) int {
		x, y := infos[a].DataOffsets, infos[b].DataOffsets
		return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1]), strings.Compare(a, b))
	})
	out := make([]SafetensorsEntry, 0, len(infos))
	for _, name := range names {
		info := infos[name]
		dt, err := ParseDType(info.DType.String())
		if err != nil {
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q has unsupported dtype %v: %w", path, name, info.DType, ErrDType)
		}
		shape, err := SafetensorsShape(info.Shape)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q: %w", path, name, err)
		}
		b := data[info.DataOffsets[0]:info.DataOffsets[1]]
		if !sizeIs(shape, dt.Size(), len(b)) { // ReadMetadata's check, kept where a copy relies on it
			return nil, nil, fmt.Errorf("tensor: safetensors %s: tensor %q: %d bytes for %v %v: %w", path, name, len(b), dt, shape, ErrShape)
		}
		out = append(out, SafetensorsEntry{Name: name, DType: dt, Shape: shape, Data: b})
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

func releaseMap(m map[string]*Tensor) {
	for _, t := range m {
		t.Release()
	}
}

// ReadSafetensorsMetadata reads only the string metadata of a safetensors
// file (its "__metadata__" header entry), without the tensors: a quick look
// at what a file is before loading it. A header longer than the file or
// than 100,000,000 bytes is refused (ErrArgument) before it is read; one
// that gives a key twice in one object, and a file of another size than
// the header describes, are refused as ReadSafetensors refuses them.
func ReadSafetensorsMetadata(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tensor: reading safetensors: %w", err)
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, fmt.Errorf("tensor: safetensors %s: bad header: %w", path, err)
	}
	size := binary.LittleEndian.Uint64(n[:])
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("tensor: reading safetensors: %w", err)
	}
	fileSize := int64(-1)
	if fi.Mode().IsRegular() {
		fileSize = fi.Size()
	}
	if err := checkHeaderLen(path, size, fileSize); err != nil {
		return nil, err
	}
	hdr := make([]byte, size)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, fmt.Errorf("tensor: safetensors %s: bad header: %w", path, err)
	}
	if !utf8.Valid(hdr) {
		return nil, fmt.Errorf("tensor: safetensors %s: bad header: not valid UTF-8: %w", path, ErrArgument)
	}
	// The entries by their exact names: encoding/json would match a
	// struct field's tag without regard to case, taking a tensor named
	// "__METADATA__" for the metadata.
	var h map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, fmt.Errorf("tensor: safetensors %s: bad header: %w", path, err)
	}
	if err := checkHeaderKeys(path, hdr); err != nil {
		return nil, err
	}
	if fileSize >= 8 { // a regular file, as long as stat says
		if end, ok := describedData(hdr); ok {
			if err := checkDataSize(path, 8+size, end, fileSize); err != nil {
				return nil, err
			}
		}
	}
	var meta map[string]string
	if raw, ok := h[stMetadataKey]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("tensor: safetensors %s: bad header: %w", path, err)
		}
	}
	return meta, nil
}

// stMetadataKey is the header entry of a safetensors file that holds its
// string metadata.
const stMetadataKey = "__metadata__"
