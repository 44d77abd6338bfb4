package main

import (
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/nn"
)

// firstWriteFails records the Go heap in use at its first write, which
// fails (a closed pipe, a full disk).
type firstWriteFails struct {
	heap   uint64
	writes int
}

func (w *firstWriteFails) Write(p []byte) (int, error) {
	if w.writes++; w.writes == 1 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		w.heap = m.HeapAlloc
	}
	return 0, errors.New("broken pipe (test)")
}

// TestAdditionStreamsProblems: -addition N draws its problems one at a
// time as it answers them, and stops at the first result it cannot
// write. It used to draw all N first (-addition 100000000 grew past
// 3 GB before answering one, a billion more than the memory there is:
// a fatal out-of-memory error), and to answer every problem after
// stdout had failed.
func TestAdditionStreamsProblems(t *testing.T) {
	cfg := testCfg
	cfg.Context = 12
	_, w := testWeights(t, cfg, true, nn.LayoutNanoGPT)
	o, err := parseFlags([]string{"-weights", w, "-addition", "3000000", "-device", "cpu"}, io.Discard)
	require.NoError(t, err)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	out := &firstWriteFails{}
	done := make(chan error, 1)
	go func() { done <- run(o, out, io.Discard) }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("-addition 3000000 went on after its first result could not be written")
	}
	require.ErrorContains(t, err, "-addition: writing the results to stdout: broken pipe (test)")
	require.Equal(t, 1, out.writes, "nothing written after the failed write")
	require.Less(t, int64(out.heap)-int64(before.HeapAlloc), int64(16<<20), "the heap at the first answer: the problems are not drawn ahead")
}
