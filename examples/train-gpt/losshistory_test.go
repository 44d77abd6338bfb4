package main

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHeldOutPastTrainingLossesRefused: held-out losses of steps past the
// training losses a state holds were dropped without a word on -resume,
// though no train-gpt saves them (metadata keeps the held-out losses of
// the steps it keeps the training losses of): such a state is corrupt,
// and is now refused as bad input (status 2), naming the file and the
// key.
func TestHeldOutPastTrainingLossesRefused(t *testing.T) {
	h := fourStepHistory()
	meta := h.metadata(4)
	meta[keyLossHistory] = base64.StdEncoding.EncodeToString(binary.LittleEndian.AppendUint32(nil, math.Float32bits(9))) // step 1's only
	var g lossHistory
	err := g.loadMetadata(meta, 4)
	require.EqualError(t, err, "metadata "+keyHeldOutHist+": step 2 out of order or outside 1 to 1, the steps of "+keyLossHistory)

	dir := t.TempDir()
	o, err := parseFlags([]string{"-device", "cpu", "-quiet", "-steps", "10", "-batch", "4", "-eval-every", "2", "-sample", "0",
		"-out", filepath.Join(dir, "w.safetensors"), "-state", filepath.Join(dir, "s.safetensors")})
	require.NoError(t, err)
	o.stopAt = 5
	require.Error(t, run(o)) // status 130, the state after step 5 saved: held-out losses at 2 and 4
	state := filepath.Join(dir, "s.safetensors")
	rewriteMetadata(t, state, func(meta map[string]string) {
		train, err := base64.StdEncoding.DecodeString(meta[keyLossHistory])
		require.NoError(t, err)
		meta[keyLossHistory] = base64.StdEncoding.EncodeToString(train[:4*3]) // steps 1 to 3
	})
	o, err = parseFlags([]string{"-device", "cpu", "-quiet", "-resume", state})
	require.NoError(t, err)
	requireBadInput(t, run(o), "-resume "+state+": not a train-gpt training state file (metadata "+keyHeldOutHist+": step 4 out of order or outside 1 to 3, the steps of "+keyLossHistory+")")
}
