package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/testfs"
	"github.com/strata-ml/strata/nn"
)

// envMainArgs makes the test binary run main with these arguments (a JSON
// list) instead of the tests: the subprocess tests send real signals.
const envMainArgs = "GENERATE_TEST_MAIN_ARGS"

func TestMain(m *testing.M) {
	if a := os.Getenv(envMainArgs); a != "" {
		var args []string
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			panic(err)
		}
		os.Args = append([]string{"generate"}, args...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lockedBuffer is a bytes.Buffer safe to read while a process's output
// is copied into it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestInterruptDuringSave: SIGINT while -save writes its file abandons
// the write: the temporary file is removed, the file there before (none
// here) is left as it was, and the status is 130. The signal used to end
// the process in the middle of the write, leaving the partial temporary
// file (.NAME.tmp-*: 67 MB of a 400 MB save) behind. The signal is sent
// once the weights are loaded (the checks' probe of -save's directory
// makes a temporary file too) and the save's file is there; one that
// lands after the write ends the process as before, the file whole: the
// attempt missed the write and is made again.
func TestInterruptDuringSave(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a subprocess")
	}
	cfg := nn.GPTConfig{Vocab: 256, Context: 16, Layers: 8, Heads: 4, Width: 512} // 100 MB of weights
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	for attempt := 1; ; attempt++ {
		dir := t.TempDir()
		out := filepath.Join(dir, "s.safetensors")
		a, err := json.Marshal([]string{"-weights", w, "-save", out, "-device", "cpu"})
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), envMainArgs+"="+string(a))
		var stderr lockedBuffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		deadline := time.Now().Add(30 * time.Second)
		for !(strings.Contains(stderr.String(), "loaded in") && len(testfs.Names(t, dir)) > 0) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		err = cmd.Wait()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%v: %s", err, stderr.String())
		late := ee.ExitCode() == -1 || strings.Contains(stderr.String(), "done, then stopped")
		if late && attempt < 5 && slices.Equal(testfs.Names(t, dir), []string{"s.safetensors"}) {
			t.Logf("attempt %d: the signal landed after the write", attempt)
			continue
		}
		require.Equal(t, 130, ee.ExitCode(), stderr.String())
		require.Empty(t, testfs.Names(t, dir), "no temporary file, no partial output: %s", stderr.String())
		require.Contains(t, stderr.String(), "interrupt while saving the weights to "+out+": abandoned it")
		return
	}
}
