package autograd_test

import (
	"github.com/strata-ml/strata/memory/memtest"
	"github.com/strata-ml/strata/tensor"
)

// settledInUse is the CPU's bytes in use with earlier tests' forgotten
// tensors collected (memtest.Settled): a baseline a later free cannot
// undercut.
func settledInUse() int64 { return memtest.Settled(tensor.CPU().Memory()) }
