package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// -grad-dtype bf16 keeps the blocks' matrix weights' gradients in bf16:
// the run trains as with float32 gradients up to their rounding (losses
// within 1%, and not all equal: the rounding reaches the weights), on the
// CPU and on the GPU; the pipelined update gives the plain one's losses
// bit for bit with them too (its kernel reads them as the plain one's
// does, the CPU widens them the same way); the flags it cannot go with are
// refused by name.
func TestGradDTypeBF16(t *testing.T) {
	onCPUAndGPU(t, func(t *testing.T, dev string) {
		base := []string{"-device", dev, "-config", "char", "-precision", "bf16", "-cuda-graph", "off"}
		ref := dpRun(t, false, base...)
		got := dpRun(t, false, append(base, "-grad-dtype", "bf16")...)
		compareLosses(t, ref, got, 0.01, "-grad-dtype bf16")
		require.NotEqual(t, ref, got, "bf16 gradients change the weights' updates")
		piped := dpRun(t, false, append(base, "-grad-dtype", "bf16", "-pipeline-optimizer")...)
		compareLosses(t, got, piped, 0, "-grad-dtype bf16 -pipeline-optimizer")
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-grad-dtype", "fp8"}, `-grad-dtype "fp8": want fp32 or bf16`},
		{[]string{"-grad-dtype", "bf16"}, "needs -precision bf16"},
		{[]string{"-grad-dtype", "bf16", "-precision", "fp16"}, "needs -precision bf16"},
		{[]string{"-grad-dtype", "bf16", "-precision", "bf16", "-cuda-graph", "on"}, "not with -cuda-graph on"},
	} {
		_, err := parseFlags(c.args)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
}
