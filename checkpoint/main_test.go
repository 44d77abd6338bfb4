package checkpoint_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// TestMain fails the run when any test or example let a tensor go
// unreleased: the garbage collector's safety net frees such a tensor at a
// moment no test controls (which made the exact leak checks flaky), so a
// leak is caught here deterministically once everything has been collected.
func TestMain(m *testing.M) {
	code := m.Run()
	memtest.Settled(tensor.CPU().Memory())
	if n := tensor.LeakedTensors(); n != 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "checkpoint tests: %d tensors were collected without Release (run with STRATA_DEBUG=1 to name the ops)\n", n)
		code = 1
	}
	os.Exit(code)
}
