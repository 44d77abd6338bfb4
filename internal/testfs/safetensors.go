package testfs

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// EditSafetensorsEntry writes to dst the safetensors file src with its
// header's entry for tensor name changed by edit (its data as it was), to
// make files whose headers lie: a shape the data does not hold, bad
// offsets. It fails t when src cannot be read or has no such entry.
func EditSafetensorsEntry(t testing.TB, src, dst, name string, edit func(e map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 8, "%s: not a safetensors file", src)
	n := binary.LittleEndian.Uint64(b[:8])
	require.LessOrEqual(t, n, uint64(len(b)-8), "%s: header longer than the file", src)
	var h map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b[8:8+n], &h))
	require.Contains(t, h, name, "%s: no tensor %q", src, name)
	var e map[string]any
	require.NoError(t, json.Unmarshal(h[name], &e))
	edit(e)
	raw, err := json.Marshal(e)
	require.NoError(t, err)
	h[name] = raw
	hdr, err := json.Marshal(h)
	require.NoError(t, err)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	require.NoError(t, os.WriteFile(dst, append(append(out, hdr...), b[8+n:]...), 0o644))
}
