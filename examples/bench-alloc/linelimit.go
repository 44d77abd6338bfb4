package main

import (
	"bytes"
	"fmt"
	"io"
)

// maxTraceLine is the longest line readTrace takes. A trace's lines are
// about 40 bytes (an action and three numbers); a script that also
// writes PyTorch's other keys (frames: the Python stack of each
// allocation, a few KB for a deep one) stays far below 1 MiB. A longer
// line is no trace's (a binary file, or one with no line ends), and the
// CSV reader would hold all of it in memory, without bound on a pipe.
const maxTraceLine = 1 << 20

// lineLimit reads r and fails with a *longLineError once a line runs
// past max bytes; it stays failed.
type lineLimit struct {
	r    io.Reader
	max  int
	n    int // bytes of the current line so far
	line int // lines ended so far
	err  error
}

func (l *lineLimit) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for b := p[:n]; l.n <= l.max; {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			l.n += len(b)
			break
		}
		if l.n += i; l.n > l.max {
			break
		}
		l.n, l.line, b = 0, l.line+1, b[i+1:]
	}
	if l.n > l.max {
		l.err = &longLineError{line: l.line + 1, max: l.max}
		return n, l.err
	}
	return n, err
}

// longLineError is a line longer than lineLimit's max: line is its
// number, from 1, which readTrace puts after the file's name.
type longLineError struct{ line, max int }

func (e *longLineError) Error() string {
	return fmt.Sprintf("a line longer than %d bytes: not a trace (a binary file, or one with no line ends?)", e.max)
}
