package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// specialFiles makes, in dir, a named pipe, a socket and (where the
// process may) a character device, each a stand-in for a target that is
// not a regular file; the device is skipped where mknod is not allowed.
func specialFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	m[fifo] = "a named pipe"
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	m[sock] = "a socket"
	dev := filepath.Join(dir, "chardev")
	// A character device node made here, in the test's own directory (1, 3:
	// the null device's numbers); it is never opened.
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o644, 1<<8|3); err == nil {
		m[dev] = "a device"
	} else {
		t.Logf("no device stand-in: %v", err)
	}
	return m
}

// A target that is not a regular file (a named pipe, a socket, a device)
// is refused by Write and CheckWritable and left as it was: train-gpt
// -out /dev/full used to replace the device with a regular file.
func TestWriteRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	for path, kind := range specialFiles(t, dir) {
		before, err := os.Lstat(path)
		require.NoError(t, err)
		err = Write(context.Background(), path, func(w io.Writer) error {
			_, err := io.WriteString(w, "new")
			return err
		})
		require.ErrorContains(t, err, path+" is not a regular file ("+kind+")")
		require.ErrorContains(t, CheckWritable(path), path+" is not a regular file ("+kind+")")
		after, err := os.Lstat(path)
		require.NoError(t, err)
		require.Equal(t, before.Mode(), after.Mode(), path)
		require.True(t, os.SameFile(before, after), path)
		// Through a symbolic link as well.
		link := path + ".link"
		require.NoError(t, os.Symlink(filepath.Base(path), link))
		require.ErrorContains(t, Write(context.Background(), link, func(w io.Writer) error { return nil }), "is not a regular file ("+kind+")")
		require.ErrorContains(t, CheckWritable(link), "is not a regular file ("+kind+")")
	}
	names := testfs.Names(t, dir)
	for _, n := range names {
		require.NotContains(t, n, ".tmp-", "no temporary file is left")
	}
}

// TestWriteRefusesPipeThroughProc: /dev/stdout when it is a pipe (here
// /proc/self/fd/N of one, where /dev/stdout's links end) is refused as a
// named pipe; it was "a symbolic link to pipe:[N], which does not exist".
func TestWriteRefusesPipeThroughProc(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	path := fmt.Sprintf("/proc/self/fd/%d", w.Fd())
	if _, err := os.Lstat(path); err != nil {
		t.Skipf("no /proc: %v", err)
	}
	want := path + " is not a regular file (a named pipe)"
	require.EqualError(t, CheckWritable(path), want)
	require.EqualError(t, Write(context.Background(), path, func(w io.Writer) error { return nil }), want)
}

// A symbolic link is followed: the file it names (through a chain of
// links, in another directory) is replaced, atomically in that file's
// directory, and the links stay links. A dangling link is refused.
func TestWriteFollowsSymlinks(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	real := filepath.Join(other, "real.bin")
	require.NoError(t, os.WriteFile(real, []byte("old"), 0o644))
	mid := filepath.Join(dir, "mid")
	require.NoError(t, os.Symlink(real, mid))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink("mid", link)) // relative, to a link
	require.NoError(t, CheckWritable(link))
	require.NoError(t, Write(context.Background(), link, func(w io.Writer) error {
		_, err := io.WriteString(w, "new")
		return err
	}))
	b, err := os.ReadFile(real)
	require.NoError(t, err)
	require.Equal(t, "new", string(b))
	for _, l := range []string{link, mid} {
		fi, err := os.Lstat(l)
		require.NoError(t, err)
		require.True(t, fi.Mode()&os.ModeSymlink != 0, "%s is still a link", l)
	}
	require.ElementsMatch(t, []string{"link", "mid"}, testfs.Names(t, dir))
	require.Equal(t, []string{"real.bin"}, testfs.Names(t, other))

	dangling := filepath.Join(dir, "dangling")
	require.NoError(t, os.Symlink(filepath.Join(other, "missing.bin"), dangling))
	want := dangling + " is a symbolic link to " + filepath.Join(other, "missing.bin") + ", which does not exist"
	require.ErrorContains(t, CheckWritable(dangling), want)
	require.ErrorContains(t, Write(context.Background(), dangling, func(w io.Writer) error { return nil }), want)
	loop := filepath.Join(dir, "loop")
	require.NoError(t, os.Symlink("loop", loop))
	require.Error(t, CheckWritable(loop))
	require.Error(t, Write(context.Background(), loop, func(w io.Writer) error { return nil }))
	require.Equal(t, []string{"real.bin"}, testfs.Names(t, other), "nothing created at a dangling link's target")
	fi, err := os.Lstat(dangling)
	require.NoError(t, err)
	require.True(t, fi.Mode()&os.ModeSymlink != 0)
}

// TestRemoveStale: the temporary files a write killed midway left beside
// a path (".base.tmp-<digits>") are removed, through a symbolic link
// too; other files, and names that only look alike, stay.
func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gpt.state.safetensors")
	for _, n := range []string{"gpt.state.safetensors", ".gpt.state.safetensors.tmp-2082013518", ".gpt.state.safetensors.tmp-7",
		".gpt.state.safetensors.tmp-12x", ".other.tmp-123", "gpt.state.safetensors.tmp-5"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
	link := filepath.Join(t.TempDir(), "link.safetensors")
	require.NoError(t, os.Symlink(path, link))
	gone, err := RemoveStale(link)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{filepath.Join(dir, ".gpt.state.safetensors.tmp-2082013518"), filepath.Join(dir, ".gpt.state.safetensors.tmp-7")}, gone)
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{"gpt.state.safetensors", ".gpt.state.safetensors.tmp-12x", ".other.tmp-123", "gpt.state.safetensors.tmp-5"}, names)
	gone, err = RemoveStale(path)
	require.NoError(t, err)
	require.Empty(t, gone)
}

// TestReadRegularReadsToTheEnd: ReadRegular reads a regular file to its
// end, not to the size stat gave: /proc's files stat as empty and read as
// nothing before, and a file that grew between the two was cut short.
func TestReadRegularReadsToTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.bin")
	want := []byte(strings.Repeat("strata ", 1000))
	require.NoError(t, os.WriteFile(path, want, 0o644))
	got, err := ReadRegular(path, 1<<20)
	require.NoError(t, err)
	require.Equal(t, want, got)
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	got, err = ReadRegular("/proc/self/status", 1<<20)
	require.NoError(t, err)
	require.Contains(t, string(got), "Name:")
}

// TestSyncDirUnsupported: a directory whose file system cannot sync it
// (fsync fails with EINVAL, as /proc's does on Linux) is not a failure of
// the write: the rename is made, and there is nothing more to make
// durable. The check compared with os.ErrInvalid, which EINVAL is not,
// so Write reported such a directory as a failure after the new file was
// in place.
func TestSyncDirUnsupported(t *testing.T) {
	d, err := os.Open("/proc")
	if err != nil {
		t.Skip("no /proc here")
	}
	err = d.Sync()
	d.Close()
	if !errors.Is(err, syscall.EINVAL) {
		t.Skipf("syncing /proc gives %v here, not EINVAL", err)
	}
	require.NoError(t, syncDir("/proc"))
}

// TestReadRegularRefusesOverLimit: a file larger than ReadRegular's limit
// (a sparse one, of no disk) is an error naming it and both sizes,
// wrapping ErrTooLarge: its size was allocated whole, and a terabyte's
// allocation killed the process with a fatal out of memory.
func TestReadRegularRefusesOverLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"n_head": 2}`), 0o644))
	const size = 1 << 40
	require.NoError(t, os.Truncate(path, size))
	_, err := ReadRegular(path, 1<<20)
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "1099511627776 bytes")
	require.ErrorContains(t, err, "1048576 bytes")

	// At the limit it is read; one byte over is refused, and so is a file
	// that Stat gave as smaller but reads as more (/proc's).
	require.NoError(t, os.Truncate(path, 100))
	got, err := ReadRegular(path, 100)
	require.NoError(t, err)
	require.Len(t, got, 100)
	_, err = ReadRegular(path, 99)
	require.ErrorIs(t, err, ErrTooLarge)
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	_, err = ReadRegular("/proc/self/status", 10) // stats as empty
	require.ErrorIs(t, err, ErrTooLarge)
	require.ErrorContains(t, err, "grew past the 10 bytes")
}

// TestReadRegularNoLimit: a limit of math.MaxInt64 (no limit at all)
// reads the whole file. The byte read past the limit, to tell a file that
// grew past it, was asked for as limit+1, which wraps to a negative count
// there: io.LimitReader then read nothing, and the file came back empty,
// without an error.
func TestReadRegularNoLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	want := []byte(`{"n_head": 2}`)
	require.NoError(t, os.WriteFile(path, want, 0o644))
	got, err := ReadRegular(path, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, want, got)
}
