package nn_test

import (
	"runtime"
	"time"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

func autogradParam(t *tensor.Tensor) *autograd.Var { return autograd.Param(t, "p") }

// settledInUse returns the CPU's bytes in use once earlier tests'
// unreleased tensors are gone: the garbage collector's cleanups free them
// at any moment, so a baseline taken before they ran could be undercut by
// a free during the test and fail an exact comparison. It collects until
// two readings agree.
func settledInUse() int64 {
	m := tensor.CPU().Memory()
	prev := int64(-1)
	for range 20 {
		runtime.GC()
		time.Sleep(2 * time.Millisecond) // cleanups run on their own goroutine
		v := m.InUse()
		if v == prev {
			break
		}
		prev = v
	}
	return prev
}
