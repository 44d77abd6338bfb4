package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// -pipeline-width needs -pipeline-optimizer, which is not combined with
// -overlap-optimizer or data parallelism.
func TestPipelineFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-pipeline-width", "4"}, "-pipeline-width: only with -pipeline-optimizer"},
		{[]string{"-pipeline-optimizer", "-pipeline-width", "-1"}, "-pipeline-width -1"},
		{[]string{"-pipeline-optimizer", "-overlap-optimizer"}, "not with -overlap-optimizer"},
		{[]string{"-pipeline-optimizer", "-gpus", "2"}, "not with -gpus"},
	} {
		_, err := parseFlags(tc.args)
		require.ErrorContains(t, err, tc.msg, "%v", tc.args)
	}
	o, err := parseFlags([]string{"-pipeline-optimizer", "-pipeline-width", "66"})
	require.NoError(t, err)
	require.True(t, o.pipelineOpt)
	require.Equal(t, 66, o.pipelineWidth)
}

// train-gpt with the optimizer pipelined gives the plain run's losses bit
// for bit on the CPU (the same update a layer at a time, each layer's
// gradients released as it is queued), with block checkpointing and the
// gradient clipped every step, at the default width and at one block
// striding over a layer's rows (on the CPU the width changes nothing; on a
// GPU, onCPUAndGPU's tests run them there too).
func TestPipelineOptimizerSameLosses(t *testing.T) {
	onCPUAndGPU(t, func(t *testing.T, dev string) {
		args := []string{"-device", dev, "-checkpoint", "blocks", "-clip", "0.05", "-cuda-graph", "off"}
		ref := dpRun(t, false, args...)
		compareLosses(t, ref, dpRun(t, false, append(args, "-pipeline-optimizer")...), 0, "-pipeline-optimizer")
		compareLosses(t, ref, dpRun(t, false, append(args, "-pipeline-optimizer", "-pipeline-width", "1")...), 0, "-pipeline-optimizer -pipeline-width 1")
	})
}
