package memtest

import (
	"fmt"
	"os"
	"testing"
)

// RunLeakChecked runs a test binary's tests and examples (m.Run) and
// returns the exit code for os.Exit: 1 when they passed but leaked() is
// not zero once mem has settled (Settled). leaked counts the objects the
// garbage collector found unreleased (tensor.LeakedTensors). The
// collector's safety net frees such an object at a moment no test
// controls, which makes exact leak checks flaky; counted after the run, a
// leak fails it every time. suite names the package in the message.
func RunLeakChecked(m *testing.M, suite string, mem interface{ InUse() int64 }, leaked func() int64) int {
	code := m.Run()
	Settled(mem)
	if n := leaked(); n != 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "%s tests: %d tensors were collected without Release (STRATA_DEBUG=1 prints each with the stack that made it)\n", suite, n)
		code = 1
	}
	return code
}
