package tensor

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/strata-ml/strata/tensor/internal/cpukern"
)

// Sentinel errors, for errors.Is. Memory errors (memory.ErrOutOfMemory and
// friends) pass through unchanged inside an *OpError.
var (
	ErrShape    = errors.New("shape mismatch")
	ErrDType    = errors.New("dtype mismatch or unsupported dtype")
	ErrDevice   = errors.New("device mismatch or unavailable device")
	ErrReleased = errors.New("tensor used after release")
	ErrArgument = errors.New("invalid argument")
)

// OpError is the error of a failed tensor operation. Ops that can fail on
// misuse (bad shapes, dtypes, devices) or on allocation panic with an
// *OpError; Try turns such a panic back into an ordinary error.
type OpError struct {
	Op  string // the operation, e.g. "MatMul"; another package's qualified, e.g. "nn.GPT.Forward"
	Msg string // what was wrong, with shapes and dtypes
	Err error  // the sentinel or underlying cause
}

// Error names the op: tensor's own ops as "tensor.Op", those of other
// packages as they give them (a lower-case package qualifier first).
func (e *OpError) Error() string {
	op := e.Op
	if pkg, _, ok := strings.Cut(op, "."); !ok || pkg == "" || !unicode.IsLower(rune(pkg[0])) {
		op = "tensor." + op
	}
	if e.Msg == "" {
		return fmt.Sprintf("%s: %v", op, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", op, e.Msg, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// fail panics with an *OpError.
func fail(op string, err error, format string, args ...any) {
	panic(&OpError{Op: op, Msg: fmt.Sprintf(format, args...), Err: err})
}

// Try runs fn and returns the *OpError it panicked with, if any, as an
// error. Any other panic (a bug) is passed on. Use it around a training
// step or a model call to turn shape mistakes and out-of-memory into errors.
// A nil fn is an *OpError wrapping ErrArgument.
func Try(fn func()) (err error) {
	if fn == nil {
		return &OpError{Op: "Try", Msg: "nil function", Err: ErrArgument}
	}
	defer func() {
		if r := recover(); r != nil {
			if oe, ok := r.(*OpError); ok {
				err = oe
				return
			}
			panic(r)
		}
	}()
	fn()
	return nil
}

// releaseOnPanic, deferred by an op right after it allocates its outputs,
// releases them when the op fails after all (a backend that finds a bad
// index while it runs), so that bad input leaks nothing; the panic goes
// on unchanged.
func releaseOnPanic(outs ...*Tensor) {
	if r := recover(); r != nil {
		for _, t := range outs {
			t.Release()
		}
		panic(r)
	}
}

// kernelFault is the message of a kernel's error (a bad index found as it
// ran) for its op's *OpError: what was wrong, without the internal
// kernel package's names ("cpukern: index out of range: cpukern.Gather:
// ids[3] = 9, ..." becomes "ids[3] = 9, ...: index out of range").
func kernelFault(err error) string {
	msg := strings.TrimPrefix(err.Error(), cpukern.ErrIndex.Error()+": ")
	if rest, ok := strings.CutPrefix(msg, "cpukern."); ok {
		if _, after, found := strings.Cut(rest, ": "); found {
			msg = after
		}
	}
	if errors.Is(err, cpukern.ErrIndex) {
		msg += ": index out of range"
	}
	return msg
}
