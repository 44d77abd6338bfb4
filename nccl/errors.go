package nccl

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalidArgument: an argument was rejected, by this package's checks
// before any call into NCCL, or by NCCL itself (ncclInvalidArgument,
// ncclInvalidUsage).
var ErrInvalidArgument = errors.New("nccl: invalid argument")

// Result is an ncclResult_t.
type Result int32

// The ncclResult_t values of NCCL 2.x.
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
)

var resultNames = [...]string{
	"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
	"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
}

func (r Result) String() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "ncclResult(" + strconv.Itoa(int(r)) + ")"
}

// Error is a failed call into NCCL: the C function (Op), what it was
// asked (Detail, may be empty), the ncclResult_t (Code), and NCCL's own
// text (Msg): ncclGetErrorString's description of the code and, where the
// library has it (2.13+), ncclGetLastError's account of the last failure.
type Error struct {
	Op     string // e.g. "ncclAllReduce"
	Detail string // e.g. "1024 float32 sum on rank 0 of 2 (cuda:0)"
	Code   Result
	Msg    string
}

func (e *Error) Error() string {
	s := "nccl: " + e.Op
	if e.Detail != "" {
		s += " (" + e.Detail + ")"
	}
	s += ": " + e.Code.String() + " (" + strconv.Itoa(int(e.Code)) + ")"
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Is reports whether target is ErrInvalidArgument and the code one NCCL
// uses for a misuse.
func (e *Error) Is(target error) bool {
	return target == ErrInvalidArgument && (e.Code == InvalidArgument || e.Code == InvalidUsage)
}

// newError describes a failed call with the library's text for the code
// and its last error. It is only called on the failure path.
func (l *lib) newError(op, detail string, code Result, comm uintptr) *Error {
	e := &Error{Op: op, Detail: detail, Code: code}
	if l.getErrorString.addr != 0 {
		e.Msg = cString(ccall(l.getErrorString.addr, uintptr(code)))
	}
	if l.getLastError.addr != 0 {
		if last := cString(ccall(l.getLastError.addr, comm)); last != "" && last != e.Msg {
			if e.Msg != "" {
				e.Msg += ": "
			}
			e.Msg += last
		}
	}
	return e
}

// argError is a misuse caught before any call into NCCL: it names the
// operation and the offending values, and wraps ErrInvalidArgument.
type argError struct{ op, msg string }

func (e *argError) Error() string { return "nccl: " + e.op + ": " + e.msg }
func (e *argError) Unwrap() error { return ErrInvalidArgument }

func invalidArg(op, format string, args ...any) error {
	return &argError{op: op, msg: fmt.Sprintf(format, args...)}
}
