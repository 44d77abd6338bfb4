// Package cli holds what the example programs share for their command
// lines, inputs and outputs. Each program refuses a bad flag before any
// work.
//
//   - Flags: ParseFlags parses a flag.FlagSet so that a bad or unknown
//     flag is one line naming it with the hint "NAME -h lists the flags"
//     (a UsageError), and -h prints the usage; UsageHint words other
//     command-line errors alike, and Usagef makes a UsageError of a
//     message. CheckDevice checks that a -device names a device (without
//     opening it), SamePath that two file flags do not name one file.
//   - Inputs: Readable checks that an input is a regular file that can
//     be opened, refusing a directory, a named pipe, a device or a socket
//     before opening it; FileKind names what such a file is.
//   - Outputs: a StickyWriter remembers the first failed write of the
//     results printed through it, so that a lost write (a full disk, a
//     closed pipe) fails the run instead of ending it with status 0.
//     Printable and Escaper escape control characters and invalid UTF-8
//     in text a program did not choose (model output) before it reaches a
//     terminal; IsTerminal tells whether a file is one.
//   - Exit statuses: ExitCode gives 0 for success and for -h, an
//     ExitError's own status (128 + the signal after an interrupt), 2 for
//     a bad flag (a UsageError), 1 for any other failure. Interruptible
//     runs an atomic write so that SIGINT or SIGTERM abandons it, leaving
//     no temporary file, and ends the run with an ExitError.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

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

// OpenDevice opens the device a -device flag names (flagValue; empty:
// $STRATA_DEVICE, else auto). A malformed name is CheckDevice's error; a
// device that cannot be used says what is wrong with it (-device cuda: no
// usable GPU: cannot load the CUDA driver library ...), without tensor's
// prefix and its generic words. Programs report either as a bad flag,
// decided before any work.
func OpenDevice(flagValue string) (tensor.Device, error) {
	if err := CheckDevice(flagValue); err != nil {
		return nil, err
	}
	dev, err := tensor.ParseDevice(flagValue)
	if err == nil {
		return dev, nil
	}
	what := "-device " + flagValue
	if flagValue == "" {
		what = fmt.Sprintf("-device (STRATA_DEVICE=%q)", os.Getenv("STRATA_DEVICE"))
	}
	cause := err.Error()
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		var parts []string
		for _, e := range u.Unwrap() {
			if e != tensor.ErrDevice {
				parts = append(parts, e.Error())
			}
		}
		if len(parts) > 0 {
			cause = strings.Join(parts, ": ")
		}
	} else {
		cause = strings.TrimSuffix(cause, ": "+tensor.ErrDevice.Error())
		if rest, ok := strings.CutPrefix(cause, "tensor: "); ok { // tensor: cuda:N: why
			if _, why, ok := strings.Cut(rest, ": "); ok {
				cause = why
			}
		}
	}
	return nil, fmt.Errorf("%s: no usable GPU: %s", what, strings.TrimPrefix(cause, "cuda: "))
}

// SamePath reports whether a and b name the same file: the same absolute
// path, or, when both exist, the same file through a link; when neither
// exists yet (outputs), the same name in the same directory through a
// link to it.
func SamePath(a, b string) bool {
	aa, errA := filepath.Abs(a)
	ab, errB := filepath.Abs(b)
	if errA == nil && errB == nil && aa == ab {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil || errB == nil {
		return errA == nil && errB == nil && os.SameFile(fa, fb)
	}
	a, b = filepath.Clean(a), filepath.Clean(b)
	if filepath.Base(a) != filepath.Base(b) {
		return false
	}
	da, errA := os.Stat(filepath.Dir(a))
	db, errB := os.Stat(filepath.Dir(b))
	return errA == nil && errB == nil && os.SameFile(da, db)
}

// UsageError marks a bad flag: the programs exit with status 2 on it.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef is a UsageError with fmt.Errorf's message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// ExitError ends a program with a status of its own, Code (128 + the
// signal after an interrupt, as a shell reports a process the signal
// killed; 2 for a bad flag found late), and the message Msg.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// ExitCode is a program's exit status for the error that ended it: 0 for
// none and for -h (flag.ErrHelp), an *ExitError's Code (found through
// wrapping, as errors.As finds it), 2 for a bad flag (a UsageError), 1
// for any other failure.
func ExitCode(err error) int {
	var ue UsageError
	var ee *ExitError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.As(err, &ue):
		return 2
	}
	return 1
}
