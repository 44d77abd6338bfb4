package atomicfile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/testfs"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.bin")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	require.NoError(t, Write(context.Background(), path, func(w io.Writer) error {
		_, err := io.WriteString(w, strings.Repeat("new", 1<<20))
		return err
	}))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 3<<20, len(b))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
	require.Equal(t, []string{"w.bin"}, testfs.Names(t, dir), "no temporary file is left")
}

// A failing writer, a cancelled context (an interrupt) and a target that
// is a directory leave the old file and no temporary.
func TestWriteFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.bin")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	boom := errors.New("boom")
	err := Write(context.Background(), path, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	})
	require.ErrorIs(t, err, boom)

	ctx, cancel := context.WithCancel(context.Background())
	err = Write(ctx, path, func(w io.Writer) error {
		for i := range 64 {
			if i == 3 {
				cancel() // the interrupt arrives while the file is being written
			}
			if _, err := w.Write(make([]byte, 1<<20)); err != nil {
				return err
			}
		}
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
	require.Equal(t, []string{"w.bin"}, testfs.Names(t, dir))

	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	err = Write(context.Background(), sub, func(w io.Writer) error { return nil })
	require.ErrorContains(t, err, "is a directory")
	require.Empty(t, testfs.Names(t, sub))
}

func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, CheckWritable(filepath.Join(dir, "new.bin")))
	require.Empty(t, testfs.Names(t, dir), "the check leaves nothing behind and does not create the file")
	require.ErrorContains(t, CheckWritable(dir), "is a directory")
	require.ErrorContains(t, CheckWritable(filepath.Join(dir, "no", "such", "w.bin")), "no/such/ does not exist")
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.ErrorContains(t, CheckWritable(filepath.Join(file, "w.bin")), "not a directory")
	require.Error(t, CheckWritable(""))
	if os.Geteuid() != 0 { // root may write anywhere
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o555))
		require.ErrorContains(t, CheckWritable(filepath.Join(ro, "w.bin")), "cannot create files in "+ro+"/: permission denied")
	}
}

// A write that panics leaves the old file and no temporary; the panic
// goes on to the caller.
func TestWritePanicKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.bin")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	require.PanicsWithValue(t, "boom", func() {
		Write(context.Background(), path, func(w io.Writer) error {
			io.WriteString(w, "partial")
			panic("boom")
		})
	})
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
	require.Equal(t, []string{"w.bin"}, testfs.Names(t, dir), "no temporary file is left")
}

// A file name near the 255-byte limit is written: the temporary file's
// name, longer than the target's, is cut short to fit.
func TestWriteLongName(t *testing.T) {
	dir := t.TempDir()
	for _, base := range []string{strings.Repeat("a", 243) + ".bin", strings.Repeat("é", 120) + ".bin"} {
		path := filepath.Join(dir, base)
		require.NoError(t, os.WriteFile(path, []byte("old"), 0o644), "the name itself is valid")
		require.NoError(t, CheckWritable(path))
		require.NoError(t, Write(context.Background(), path, func(w io.Writer) error {
			_, err := io.WriteString(w, "new")
			return err
		}))
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, "new", string(b))
		require.Equal(t, []string{base}, testfs.Names(t, dir))
		require.NoError(t, os.Remove(path))
	}
}
