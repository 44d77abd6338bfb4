package cli

import (
	"os"

	"github.com/strata-ml/strata/internal/atomicfile"
)

// Readable checks that path is a regular file that can be opened for
// reading. It refuses a directory, a named pipe, a device or a socket
// before opening it: opening a pipe with no writer blocks, reading an
// open pipe (/dev/stdin) consumes what a second read would need, and a
// device may never end (/dev/zero).
func Readable(path string) error {
	fi, err := os.Stat(path) // not Open first: see above
	if err != nil {
		return err
	}
	if err := atomicfile.NotRegular(path, fi.Mode()); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// FileKind names what a file that is not a regular one is
// (atomicfile.FileKind, which also refuses such outputs).
func FileKind(m os.FileMode) string { return atomicfile.FileKind(m) }
