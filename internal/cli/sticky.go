package cli

import "io"

// StickyWriter passes writes to W and remembers the first error one
// returned (a short write counts as io.ErrShortWrite); later writes
// return it at once. A program prints its results through one with
// fmt.Fprint, whose errors are easy to drop, and checks Err at the end,
// so that results lost to a full disk or a closed pipe fail the run
// instead of ending it with exit 0.
type StickyWriter struct {
	W   io.Writer
	Err error
}

func (s *StickyWriter) Write(p []byte) (int, error) {
	if s.Err != nil {
		return 0, s.Err
	}
	n, err := s.W.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	s.Err = err
	return n, err
}
