package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestNameFlagsAnyCase: amp.ParsePrecision and nn's parsers read their
// names in any case, and so do the flags that go through them; the
// checks that compare the names (-max-skips is fp16's) see the canonical
// one. A bad name's error keeps its flag's wording and valid values.
func TestNameFlagsAnyCase(t *testing.T) {
	o, err := parseFlags([]string{"-precision", "FP16", "-max-skips", "3", "-checkpoint", "Selective", "-checkpoint-keep-wide", "1",
		"-attention", "FUSED", "-head", "Full"})
	require.NoError(t, err)
	require.Equal(t, amp.State{Enabled: true, DType: tensor.Float16}, o.prec)
	require.Equal(t, "fp16", o.precision)
	require.Equal(t, 3, o.maxSkips)
	require.Equal(t, nn.CheckpointSelective, o.ckptMode)
	require.Equal(t, nn.AttentionFused, o.attn)
	require.Equal(t, nn.HeadLoss{}, o.headLoss)
	o, err = parseFlags([]string{"-precision", "BF16", "-grad-dtype", "bf16", "-attention", "Auto", "-head", "AUTO"})
	require.NoError(t, err)
	require.Equal(t, "bf16", o.gradDType)

	for args, want := range map[string]string{
		"-precision fp8":   `-precision "fp8": want fp32, tf32, fp16 or bf16`,
		"-checkpoint all":  `-checkpoint "all": want none, blocks, selective or auto`,
		"-attention flash": `-attention "flash": want plain, fused or auto`,
		"-head half":       `-head "half": want full, fused or auto`,
	} {
		_, err := parseFlags(strings.Fields(args))
		require.EqualError(t, err, want, args)
	}
}
