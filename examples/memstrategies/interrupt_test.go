package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/tensor"
)

// TestInterruptDuringOutputs: SIGINT or SIGTERM (a real one, sent to the
// process) while -json or -png is written abandons that write, leaving
// no temporary file and the file there before as it was, skips -png when
// it lands in -json's write, and ends the run with 128 + the signal
// (cli.ExitCode), as generate's interrupted -save does. The final writes
// had no signal handling: the signal ended the process (here, the test
// binary) in the middle of them, their temporary file left behind.
func TestInterruptDuringOutputs(t *testing.T) {
	for _, c := range []struct {
		flag string
		sig  syscall.Signal
	}{{"-json", syscall.SIGINT}, {"-png", syscall.SIGTERM}, {"-json", syscall.SIGTERM}, {"-png", syscall.SIGINT}} {
		dir := t.TempDir()
		png, js := filepath.Join(dir, "m.png"), filepath.Join(dir, "m.jsonl")
		require.NoError(t, os.WriteFile(js, []byte("old\n"), 0o644))
		require.NoError(t, os.WriteFile(png, []byte("old png"), 0o644))
		o, err := parse([]string{"-config", "tiny", "-steps", "1", "-warmup", "0", "-strategies", "device", "-png", png, "-json", js}, &bytes.Buffer{})
		require.NoError(t, err)
		var wrote []string
		o.testWriting = func(ctx context.Context, flag string) {
			wrote = append(wrote, flag)
			if flag != c.flag {
				return
			}
			require.NoError(t, syscall.Kill(os.Getpid(), c.sig))
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
				t.Errorf("%s %v: the signal did not cancel the write", c.flag, c.sig)
			}
		}
		var stdout, stderr bytes.Buffer
		err = run(o, tensor.CPU(), &stdout, &stderr)
		var ex *cli.ExitError
		require.True(t, errors.As(err, &ex), "%s %v: %v", c.flag, c.sig, err)
		require.Equal(t, 128+int(c.sig), cli.ExitCode(err), "%s %v", c.flag, c.sig)
		what := map[string]string{"-json": "writing the JSON lines to " + js, "-png": "writing the bar chart to " + png}[c.flag]
		require.EqualError(t, err, fmt.Sprintf("%v while %s: abandoned it (the file there before, if any, is unchanged)", c.sig, what))
		require.Equal(t, []string{"m.jsonl", "m.png"}, testfs.Names(t, dir), "%s %v: no temporary file", c.flag, c.sig)
		data, err := os.ReadFile(png)
		require.NoError(t, err)
		require.Equal(t, "old png", string(data), "%s %v: -png abandoned, or not started", c.flag, c.sig)
		data, err = os.ReadFile(js)
		require.NoError(t, err)
		if c.flag == "-json" {
			require.Equal(t, "old\n", string(data), "%v: -json abandoned", c.sig)
			require.Equal(t, []string{"-json"}, wrote, "%v: -png not started", c.sig)
		} else {
			require.Equal(t, stdout.String(), string(data), "%v: -json written before", c.sig)
			require.Equal(t, []string{"-json", "-png"}, wrote)
		}
		require.NotContains(t, stderr.String(), "bar chart:")
	}
}
