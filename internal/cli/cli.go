// Package cli holds the checks the example programs share for their
// flags: that a -device names a device (without opening it) and that two
// file flags do not name one file. Each program refuses a flag that fails
// them before any work, with exit status 2.
package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-ml/strata/tensor"
)

// CheckDevice checks the form of a -device flag's value, as
// tensor.ParseDevice reads it (the empty string is $STRATA_DEVICE),
// without opening the device. The error names the flag, or the variable.
func CheckDevice(flagValue string) error {
	if tensor.CheckDeviceName(flagValue) == nil {
		return nil
	}
	what := fmt.Sprintf("-device %q", flagValue)
	if flagValue == "" {
		what = fmt.Sprintf("-device (STRATA_DEVICE=%q)", os.Getenv("STRATA_DEVICE"))
	}
	return fmt.Errorf("%s: want cpu, cuda, cuda:N or auto", what)
}

// SamePath reports whether a and b name the same file: the same absolute
// path, or, when both exist, the same file through a link.
func SamePath(a, b string) bool {
	aa, errA := filepath.Abs(a)
	ab, errB := filepath.Abs(b)
	if errA == nil && errB == nil && aa == ab {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
