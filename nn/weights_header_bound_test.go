package nn_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// ReadWeightsInfo bounds a header as the tensor package's readers do, at
// tensor.MaxSafetensorsHeader (100,000,000 bytes): a header one byte over
// is refused, before it is read, with an error naming the file, the size
// and the limit (nn took up to 100 MiB, and failed later on such a file,
// without saying why); one at the bound is read by both.
func TestReadWeightsInfoHeaderBound(t *testing.T) {
	require.EqualValues(t, 100_000_000, tensor.MaxSafetensorsHeader)
	dir := t.TempDir()

	over := filepath.Join(dir, "over.safetensors")
	b := binary.LittleEndian.AppendUint64(nil, tensor.MaxSafetensorsHeader+1)
	require.NoError(t, os.WriteFile(over, append(b, "{}      "...), 0o644))
	_, err := nn.ReadWeightsInfo(over)
	require.EqualError(t, err, fmt.Sprintf("nn: %s: not a safetensors file: a header of 100000001 bytes, over the limit of 100000000 bytes", over))
	_, _, cerr := nn.GPTConfigOfWeights(over)
	require.Equal(t, err.Error(), cerr.Error())
	_, err = tensor.ReadSafetensorsMetadata(over)
	require.ErrorContains(t, err, "100000001 bytes long, over the limit of 100000000 bytes")

	// At the bound: "{}" and spaces to the limit, no tensors.
	at := filepath.Join(dir, "at.safetensors")
	b = binary.LittleEndian.AppendUint64(nil, tensor.MaxSafetensorsHeader)
	b = append(b, "{}"...)
	b = append(b, bytes.Repeat([]byte{' '}, tensor.MaxSafetensorsHeader-2)...)
	require.NoError(t, os.WriteFile(at, b, 0o644))
	b = nil
	info, err := nn.ReadWeightsInfo(at)
	require.NoError(t, err)
	require.Nil(t, info.Metadata)
	require.False(t, info.TrainState)
	meta, err := tensor.ReadSafetensorsMetadata(at)
	require.NoError(t, err)
	require.Nil(t, meta)
}

// A header longer than the file is refused before a buffer of its
// declared length is made (a 16-byte file claiming 99 MB cost 99 MB),
// and a header that is not UTF-8 is refused as the tensor package's
// readers refuse it (encoding/json read it with U+FFFD in its place).
func TestReadWeightsInfoHeaderLongerThanFileOrNotUTF8(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.safetensors")
	b := binary.LittleEndian.AppendUint64(nil, 99_000_000)
	require.NoError(t, os.WriteFile(short, append(b, "{}      "...), 0o644))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := nn.ReadWeightsInfo(short)
	runtime.ReadMemStats(&after)
	require.EqualError(t, err, fmt.Sprintf("nn: %s: not a safetensors file: a header of 99000000 bytes in a file of 16", short))
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated to refuse it")

	bad := filepath.Join(dir, "bad.safetensors")
	hdr := []byte("{\"__metadata__\":{\"k\":\"\xff\"}}")
	b = binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	require.NoError(t, os.WriteFile(bad, append(b, hdr...), 0o644))
	_, err = nn.ReadWeightsInfo(bad)
	require.EqualError(t, err, fmt.Sprintf("nn: %s: not a safetensors file: the header is not valid UTF-8", bad))
	_, err = tensor.ReadSafetensorsMetadata(bad)
	require.Error(t, err, "the tensor package refuses it too")
}
