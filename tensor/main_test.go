package tensor_test

import (
	"os"
	"sync/atomic"
	"testing"

	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// leakedOnPurpose counts the tensors the safety-net tests forget on
// purpose; the suite's leak check does not count them.
var leakedOnPurpose atomic.Int64

// TestMain fails the run when any test let a tensor go unreleased
// (memtest.RunLeakChecked), except those forgotten on purpose.
func TestMain(m *testing.M) {
	os.Exit(memtest.RunLeakChecked(m, "tensor", tensor.CPU().Memory(), func() int64 {
		return tensor.LeakedTensors() - leakedOnPurpose.Load()
	}))
}
