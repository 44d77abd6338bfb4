package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
)

// TestConfigJSONNotReadable: a config.json beside the weights that is a
// named pipe, a directory, a sparse terabyte, not JSON or of a negative
// n_head is the file's error (status 1), naming it: the pipe blocked the
// run for ever (and /dev/zero grew until the process died, as did the
// terabyte's allocation), the others were passed over and the heads
// guessed.
func TestConfigJSONNotReadable(t *testing.T) {
	_, bare := testWeights(t, testCfg, false, nn.LayoutHF)
	cfgJSON := filepath.Join(filepath.Dir(bare), "config.json")
	for _, tc := range []struct {
		what string
		make func() error
		want string
	}{
		{"a named pipe", func() error { return syscall.Mkfifo(cfgJSON, 0o644) }, cfgJSON + " is not a regular file (a named pipe)"},
		{"a directory", func() error { return os.Mkdir(cfgJSON, 0o755) }, cfgJSON + " is a directory"},
		{"not JSON", func() error { return os.WriteFile(cfgJSON, []byte(`{"n_head": 2,`), 0o644) }, cfgJSON + ": not a config.json of n_head"},
		{"a negative n_head", func() error { return os.WriteFile(cfgJSON, []byte(`{"n_head": -2}`), 0o644) }, cfgJSON + ": n_head -2"},
		{"a sparse terabyte", func() error { // its allocation killed the process
			if err := os.WriteFile(cfgJSON, []byte(`{"n_head": 2}`), 0o644); err != nil {
				return err
			}
			return os.Truncate(cfgJSON, 1<<40)
		}, cfgJSON + " is 1099511627776 bytes, more than the 4194304 bytes it may be"},
	} {
		require.NoError(t, os.RemoveAll(cfgJSON))
		require.NoError(t, tc.make(), tc.what)
		errc := make(chan error, 1)
		go func() {
			_, _, err := runArgs(t, "-weights", bare, "-prompt", "1", "-max-new", "1")
			errc <- err
		}()
		select {
		case err := <-errc:
			require.ErrorContains(t, err, tc.want, tc.what)
			var u cli.UsageError
			require.False(t, errors.As(err, &u), "%s: a usage error: %v", tc.what, err)
			require.Equal(t, 1, cli.ExitCode(err), tc.what)
		case <-time.After(10 * time.Second):
			if wr, err := os.OpenFile(cfgJSON, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				wr.Close() // let a blocked read go
			}
			t.Fatalf("config.json %s: the run still blocked after 10 s", tc.what)
		}
	}
	require.NoError(t, os.RemoveAll(cfgJSON))
	_, _, err := runArgs(t, "-weights", bare, "-heads", "2", "-prompt", "1", "-max-new", "1")
	require.NoError(t, err, "no config.json: -heads alone")
}
