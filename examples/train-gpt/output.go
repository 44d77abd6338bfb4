package main

import (
	"io"
	"os"
)

// The results the run writes as it goes (-loss-log's lines, -cpuprofile's
// profile, -bench's JSON line on stdout) are checked: a write or a close
// that fails (a full disk) fails the run, naming the file, rather than
// ending with status 0 and a truncated result.

// wrapOutput wraps -loss-log's and -cpuprofile's files; tests make it a
// writer that fails, as a full disk would.
var wrapOutput = func(w io.WriteCloser) io.WriteCloser { return w }

// stdout is where -bench prints its JSON line (tests: a failing writer).
var stdout io.Writer = os.Stdout

// firstErrWriter keeps the first error of its writes, for a writer whose
// errors its user drops (runtime/pprof ignores them).
type firstErrWriter struct {
	w   io.Writer
	err error
}

func (e *firstErrWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}
