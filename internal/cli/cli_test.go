package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckDevice(t *testing.T) {
	for _, d := range []string{"cpu", "CPU", "auto", "cuda", "gpu", "cuda:1", " cuda:0 "} {
		require.NoError(t, CheckDevice(d), d)
	}
	for _, d := range []string{"bogus", "cuda:x", "cuda:-1", "cpu0"} {
		require.EqualError(t, CheckDevice(d), `-device "`+d+`": want cpu, cuda, cuda:N or auto`)
	}
	t.Setenv("STRATA_DEVICE", "tpu")
	require.EqualError(t, CheckDevice(""), `-device (STRATA_DEVICE="tpu"): want cpu, cuda, cuda:N or auto`)
	t.Setenv("STRATA_DEVICE", "")
	require.NoError(t, CheckDevice(""))
}

func TestSamePath(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	require.NoError(t, os.WriteFile(a, nil, 0o644))
	require.NoError(t, os.Symlink(a, filepath.Join(dir, "link")))
	require.True(t, SamePath(a, filepath.Join(dir, ".", "a")))
	require.True(t, SamePath(a, filepath.Join(dir, "link")))
	require.False(t, SamePath(a, filepath.Join(dir, "b")))
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.True(t, SamePath("x.txt", filepath.Join(wd, "x.txt")), "relative and absolute, neither existing")
}
