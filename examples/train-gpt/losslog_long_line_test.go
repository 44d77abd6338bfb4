package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestResumedLossLogKeepsLinesAfterALongOne: a resumed run keeps the
// -loss-log lines of the steps its state had done and drops the rest
// (unparsable ones among them). A line of 64 KiB or more (a block of
// zeros a crash left, a stray write) stopped the reading there: every
// later line of those steps was dropped from the log and from the loss
// plot, silently.
func TestResumedLossLogKeepsLinesAfterALongOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loss.jsonl")
	var b strings.Builder
	for step := 1; step <= 4; step++ {
		fmt.Fprintf(&b, "{\"step\": %d, \"loss\": %d.5}\n", step, step)
		if step == 2 {
			b.WriteString(strings.Repeat("\x00", 70<<10) + "\n")
		}
	}
	fmt.Fprintf(&b, "{\"step\": 5, \"loss\": 5.5}\n") // after the state: dropped
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))

	var h lossHistory
	require.NoError(t, h.load(path, 4))
	require.Len(t, h.train, 4, "the loss plot's steps")

	in := watchInterrupts("test")
	defer in.stop()
	f, err := openLossLog(in, path, 4)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "{\"step\": 1, \"loss\": 1.5}\n{\"step\": 2, \"loss\": 2.5}\n{\"step\": 3, \"loss\": 3.5}\n{\"step\": 4, \"loss\": 4.5}\n", string(got))
}
