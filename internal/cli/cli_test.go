package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
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

// ParseFlags: a bad or unknown flag is one line naming it with a hint,
// a UsageError (status 2), and nothing else is printed; -h prints the
// whole usage and is flag.ErrHelp (status 0).
func TestParseFlags(t *testing.T) {
	newFS := func(out *bytes.Buffer) *flag.FlagSet {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		fs.SetOutput(out)
		fs.Int("n", 1, "a count")
		fs.Bool("v", false, "verbose")
		return fs
	}
	for args, want := range map[string]string{
		"-nosuch":   "flag provided but not defined: -nosuch (prog -h lists the flags)",
		"-n x":      `invalid value "x" for flag -n: parse error (prog -h lists the flags)`,
		"-n":        "flag needs an argument: -n (prog -h lists the flags)",
		"-v=maybe":  `invalid boolean value "maybe" for -v: parse error (prog -h lists the flags)`,
		"-n 2 -zz ": "flag provided but not defined: -zz (prog -h lists the flags)",
	} {
		var out bytes.Buffer
		err := ParseFlags(newFS(&out), strings.Fields(args))
		require.EqualError(t, err, want, args)
		require.Equal(t, 2, ExitCode(err), args)
		require.Empty(t, out.String(), "%s: the error alone, said once by the program", args)
	}
	for _, h := range []string{"-h", "-help", "--help"} {
		var out bytes.Buffer
		err := ParseFlags(newFS(&out), []string{h})
		require.ErrorIs(t, err, flag.ErrHelp)
		require.Equal(t, 0, ExitCode(err))
		require.Contains(t, out.String(), "Usage of prog:\n")
		require.Contains(t, out.String(), "a count")
	}
	var out bytes.Buffer
	fs := newFS(&out)
	fs.Usage = func() { fmt.Fprintln(fs.Output(), "custom usage") }
	require.ErrorIs(t, ParseFlags(fs, []string{"-h"}), flag.ErrHelp)
	require.Equal(t, "custom usage\n", out.String(), "a program's own Usage is kept")
	out.Reset()
	fs = newFS(&out)
	require.NoError(t, ParseFlags(fs, []string{"-n", "3", "rest"}))
	require.Equal(t, []string{"rest"}, fs.Args())
	require.Equal(t, "3", fs.Lookup("n").Value.String())
}

// TestOpenDevice: a device that cannot be used says what is wrong (the
// programs exit 2 on it, before any work, as for a bad flag; they used to
// exit 1 with tensor's "device mismatch or unavailable device").
func TestOpenDevice(t *testing.T) {
	if _, err := tensor.ParseDevice("cuda"); err == nil {
		t.Skip("a GPU is usable here")
	}
	_, err := OpenDevice("cuda")
	require.ErrorContains(t, err, "-device cuda: no usable GPU: ")
	assert.NotContains(t, err.Error(), "device mismatch")
	assert.NotContains(t, err.Error(), "tensor:")
	dev, err := OpenDevice("cpu")
	require.NoError(t, err)
	assert.Equal(t, tensor.CPU(), dev)
}
