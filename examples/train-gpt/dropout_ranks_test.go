package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/nn"
)

// TestDropoutMasksDifferAcrossRanks: with -dropout and -gpus N the ranks
// draw different masks, as one process on the global batch does for each
// slice of rows (every rank's model took its dropout seeds from -seed and
// their Ctxs' random offsets advance alike: the same positions dropped).
func TestDropoutMasksDifferAcrossRanks(t *testing.T) {
	t.Setenv(EnvDistNCCL, "")
	o, err := parseFlags([]string{"-gpus", "2", "-device", "auto", "-dropout", "0.5", "-batch", "4", "-steps", "1", "-out", ""})
	require.NoError(t, err)
	o.localRanks = true
	cfg, err := nn.LookupGPTConfig(o.config)
	require.NoError(t, err)
	cfg.Dropout = o.dropout
	dev, err := openDevices(o)
	require.NoError(t, err)
	task, err := newAdditionTask(o.digits)
	require.NoError(t, err)
	T, err := task.seqLen(cfg.Context)
	require.NoError(t, err)
	tr, err := newTrainer(o, cfg, dev, T)
	require.NoError(t, err)
	defer tr.release()
	require.NoError(t, tr.startDataParallel(o, cfg))
	r0, r1 := tr.dp.ranks[0].tr, tr.dp.ranks[1].tr
	sameSeed := r0.model.Drop.Seed == r1.model.Drop.Seed
	sameOffset := autograd.RandomState(r0.c) == autograd.RandomState(r1.c)
	assert.False(t, sameSeed && sameOffset, "rank 0 and rank 1 draw identical dropout masks (seed %d, offset %d)", r0.model.Drop.Seed, autograd.RandomState(r0.c))
}
