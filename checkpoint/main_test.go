package checkpoint_test

import (
	"os"
	"testing"

	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// TestMain fails the run when any test let a tensor go unreleased
// (memtest.RunLeakChecked).
func TestMain(m *testing.M) {
	os.Exit(memtest.RunLeakChecked(m, "checkpoint", tensor.CPU().Memory(), tensor.LeakedTensors))
}
