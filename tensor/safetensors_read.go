package tensor

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	st "github.com/nlpodyssey/safetensors"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/memory"
)

// ReadSafetensorsFile returns the bytes of the safetensors file at path,
// which must be a regular file (a symbolic link to one is followed), for a
// parser of the whole file (github.com/nlpodyssey/safetensors'
// ReadMetadata): ReadSafetensors and readers outside this package (nn's
// weights loader). It reads the 8-byte length and the header first, and
// reads the data only when the header describes the file's size, the
// header's length and its tensors' data up to where their data_offsets
// end: a valid file followed by 200 GB (a sparse tail) was read whole, and
// Go cannot turn a failed allocation of that size into an error; the
// process died. A header over MaxSafetensorsHeader bytes or longer than
// the file, and a file of another size than its header describes (N bytes
// short, or M bytes past the tensors' data), are errors naming the file,
// wrapping ErrArgument; a file that agrees with its header but is larger
// than the host memory available (memory.HostAvailable) is an error naming
// both sizes, wrapping memory.ErrOutOfMemory. A header that is not one
// (not JSON, malformed entries) is returned without the data, for the
// caller's parse to say why; so is a file shorter than the 8-byte length.
// Other errors are the file's own: one that is not a regular file is
// atomicfile.NotRegular's (a device such as /dev/zero would never end, a
// named pipe blocks), one that cannot be opened or read the os package's.
func ReadSafetensorsFile(path string) ([]byte, error) {
	f, fi, err := atomicfile.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := fi.Size()
	var n [8]byte
	if k, err := io.ReadFull(f, n[:]); err == io.EOF || err == io.ErrUnexpectedEOF {
		return n[:k], nil // the caller's parse says the header is too small
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	hlen := binary.LittleEndian.Uint64(n[:])
	if err := checkHeaderLen(path, hlen, size); err != nil {
		return nil, err
	}
	if size < 8 {
		return nil, grew(path, size)
	}
	head := make([]byte, 8+hlen)
	copy(head, n[:])
	if _, err := io.ReadFull(f, head[8:]); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	end, ok := describedData(head[8:])
	if !ok {
		return head, nil
	}
	if err := checkDataSize(path, 8+hlen, end, size); err != nil {
		return nil, err
	}
	if err := checkHostMemory(path, size); err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	copy(buf, head)
	if _, err := io.ReadFull(f, buf[len(head):]); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A file that grew since Stat has bytes past the tensors' data now.
	if k, _ := f.Read(n[:1]); k > 0 {
		return nil, grew(path, size)
	}
	return buf, nil
}

// checkHostMemory returns the error, wrapping memory.ErrOutOfMemory, of
// a file of size bytes (its header truthful) that is larger than the host
// memory available to read it into (memory.HostAvailable): the slice's
// allocation would kill the process, as Go cannot turn it into an error.
// It returns nil where the available memory cannot be read.
func checkHostMemory(path string, size int64) error {
	avail, ok := memory.HostAvailable()
	if !ok || size <= avail {
		return nil
	}
	return fmt.Errorf("tensor: safetensors %s: reading its %s (%d bytes) needs as much host memory; %s is available: %w",
		path, memory.FormatBytes(size), size, memory.FormatBytes(avail), memory.ErrOutOfMemory)
}

// grew is the error of a file that has more bytes than the size bytes
// Stat gave it: it grew while it was read, or is not a file of bytes
// (/proc's stat as empty).
func grew(path string, size int64) error {
	return fmt.Errorf("tensor: safetensors %s: more than the %d bytes on disk could be read: the file grew while it was read: %w", path, size, ErrArgument)
}

// describedData returns where the tensors' data ends, in bytes from its
// start, as the header hdr's data_offsets give it; ok is false when hdr
// is not a header github.com/nlpodyssey/safetensors can parse. (The
// header is parsed again by the caller's reader: a few KB for a GPT.)
func describedData(hdr []byte) (end uint64, ok bool) {
	var md st.Metadata
	if json.Unmarshal(hdr, &md) != nil {
		return 0, false
	}
	for _, info := range md.Tensors() {
		end = max(end, info.DataOffsets[1])
	}
	return end, true
}

// checkDataSize returns the error, wrapping ErrArgument, of a file of
// size bytes whose header, hlen bytes with its 8-byte length, describes
// tensor data ending end bytes after it, when the two sizes differ: the
// file is cut short, or has bytes past the tensors' data; nil when they
// agree.
func checkDataSize(path string, hlen, end uint64, size int64) error {
	data := uint64(size) - hlen
	switch {
	case end == data:
		return nil
	case end < data:
		return fmt.Errorf("tensor: safetensors %s: its header describes a file of %d bytes, it has %d on disk: %d bytes past the tensors' data: %w", path, hlen+end, size, data-end, ErrArgument)
	}
	described := strconv.FormatUint(hlen+end, 10)
	if hlen+end < end { // past 2^64
		described = fmt.Sprintf("%d + %d", hlen, end)
	}
	return fmt.Errorf("tensor: safetensors %s: its header describes a file of %s bytes, it has %d on disk: %d bytes short: %w", path, described, size, end-data, ErrArgument)
}
