package tensor

import (
	"errors"
	"fmt"
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
	Op  string // the operation, e.g. "MatMul"
	Msg string // what was wrong, with shapes and dtypes
	Err error  // the sentinel or underlying cause
}

func (e *OpError) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("tensor.%s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("tensor.%s: %s: %v", e.Op, e.Msg, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// fail panics with an *OpError.
func fail(op string, err error, format string, args ...any) {
	panic(&OpError{Op: op, Msg: fmt.Sprintf(format, args...), Err: err})
}

// Try runs fn and returns the *OpError it panicked with, if any, as an
// error. Any other panic (a bug) is passed on. Use it around a training
// step or a model call to turn shape mistakes and out-of-memory into errors.
func Try(fn func()) (err error) {
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
