package cli

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

type short struct{}

func (short) Write(p []byte) (int, error) { return len(p) / 2, nil }

// The first error sticks, and later writes return it without writing.
func TestStickyWriter(t *testing.T) {
	w := &failAfter{n: 1}
	s := &StickyWriter{W: w}
	_, err := fmt.Fprintln(s, "one")
	require.NoError(t, err)
	require.NoError(t, s.Err)
	fmt.Fprintln(s, "two")
	require.EqualError(t, s.Err, "disk full")
	w.n = 5
	_, err = fmt.Fprintln(s, "three")
	require.EqualError(t, err, "disk full")
	require.Equal(t, 5, w.n, "nothing written after the error")

	s = &StickyWriter{W: short{}}
	fmt.Fprint(s, "abcd")
	require.ErrorIs(t, s.Err, io.ErrShortWrite)
}
