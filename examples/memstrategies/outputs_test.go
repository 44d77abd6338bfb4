package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/tensor"
)

// TestOutputNotAFile: -json or -png naming a named pipe, a device or a
// dangling symbolic link is refused by parse, naming the flag, before any
// strategy trains. The check used to open the path for writing: a FIFO
// blocked it forever (no reader), and /dev/null or a dangling link passed
// it, the run failing (status 1) only after every strategy had trained,
// when the atomic write refused them (-png's error not naming the flag).
func TestOutputNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(dir, "missing"), dangling))
	for _, c := range []struct {
		flag, path, want string
	}{
		{"-json", os.DevNull, "not a regular file (a device)"},
		{"-png", os.DevNull, "not a regular file (a device)"},
		{"-json", dangling, "which does not exist"},
		{"-png", dangling, "which does not exist"},
		{"-json", fifo, "not a regular file (a named pipe)"},
		{"-png", fifo, "not a regular file (a named pipe)"},
	} {
		args := []string{"-config", "tiny", "-strategies", "device", "-png", "", c.flag, c.path}
		done := make(chan error, 1)
		go func() {
			_, err := parse(args, &bytes.Buffer{})
			done <- err
		}()
		select {
		case err := <-done:
			require.Error(t, err, "%s %s", c.flag, c.path)
			assert.True(t, strings.HasPrefix(err.Error(), c.flag+": "), "%s %s: %v", c.flag, c.path, err)
			assert.Contains(t, err.Error(), c.want, "%s %s", c.flag, c.path)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %s: parse blocked", c.flag, c.path)
		}
	}
	assert.Equal(t, []string{"dangling", "fifo"}, testfs.Names(t, dir), "nothing created")
}

// TestBudgetShareOfDevice: a -budget share checked against the device's
// memory before any strategy runs: one that comes to less than a byte of
// it is a bad flag (status 2), with no row trained. Parse checks the
// form against 1 TiB; the share used to be read again only when the
// hybrid strategy started, failing the run (status 1) after the device
// strategy had trained, its error offering "off", which -budget refuses.
func TestBudgetShareOfDevice(t *testing.T) {
	for _, args := range [][]string{
		{"-strategies", "device,hybrid", "-budget", "0.000000000001"},
		{"-strategies", "device,hybrid-ckpt", "-hybrid-ckpt-budget", "0.000000000001"},
	} {
		o, err := parse(append([]string{"-config", "tiny", "-steps", "1", "-warmup", "0", "-png", ""}, args...), &bytes.Buffer{})
		require.NoError(t, err, "%q", args)
		var stdout, stderr bytes.Buffer
		err = run(o, tensor.CPU(), &stdout, &stderr)
		require.Error(t, err, "%q", args)
		assert.True(t, strings.HasPrefix(err.Error(), args[2]+": "), "%q: %v", args, err)
		assert.Contains(t, err.Error(), "less than a byte", "%q", args)
		if args[2] == "-budget" {
			assert.NotContains(t, err.Error(), ", or off", "%q", args)
		}
		assert.Equal(t, 2, cli.ExitCode(err), "%q", args)
		assert.Empty(t, stdout.String(), "%q: no strategy ran", args)
	}
}

// TestAttentionError: -attention's error lists every value it takes,
// auto (its default) included, as train-gpt's does; it used to pass on
// nn's "want plain or fused".
func TestAttentionError(t *testing.T) {
	for _, v := range []string{"bogus", "", "fused2"} { // any case of a name is taken (flag_case_test.go)
		_, err := parse([]string{"-config", "tiny", "-png", "", "-attention", v}, &bytes.Buffer{})
		require.EqualError(t, err, `-attention "`+v+`": want plain, fused or auto`, v)
	}
}
