package main

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/tensor"
)

// TestUnusableDeviceMessage: a device this machine cannot use is named as
// generate names it (cli.OpenDevice): the flag's value, or
// STRATA_DEVICE's when the flag is unset, and what is wrong with it. It
// used to read "-device: tensor: cuda:0: device mismatch or unavailable
// device: cuda: cannot load ...", naming no value and blaming a
// mismatch, and the same under STRATA_DEVICE=cuda, which it did not name.
func TestUnusableDeviceMessage(t *testing.T) {
	if _, err := tensor.CUDA(0); err == nil {
		t.Skip("a GPU is usable here")
	}
	dir := t.TempDir()
	for env, c := range map[string]struct {
		args []string
		want string
	}{
		"":     {[]string{"-device", "cuda"}, "-device cuda: no usable GPU: "},
		"cuda": {nil, `-device (STRATA_DEVICE="cuda"): no usable GPU: `},
	} {
		t.Setenv("STRATA_DEVICE", env)
		o, err := parseFlags(append(c.args, "-steps", "3", "-quiet", "-out", filepath.Join(dir, "w.safetensors")))
		require.NoError(t, err)
		err = run(o)
		var ex *cli.ExitError
		require.True(t, errors.As(err, &ex), "%v", err)
		require.Equal(t, 2, ex.Code)
		require.Contains(t, ex.Msg, c.want)
		require.NotContains(t, ex.Msg, "device mismatch")
		require.NotContains(t, ex.Msg, "tensor:")
	}
}
