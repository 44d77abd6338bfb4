// Package atomicfile writes files so that a reader sees the old file or
// the whole new one, never a part, and a crash or power loss right after
// Write returns keeps the new one: the bytes go to a temporary file in the
// same directory, which is synced, renamed over the target, and the
// directory synced. On any failure (a panic of the write function
// included), or when the caller's context is cancelled (an interrupt), the
// temporary file is removed and the target is left as it was; the one
// exception is a failure to sync the directory after the rename, when the
// new file is in place but its rename may not survive a crash.
//
// The target must be a regular file or not exist: a directory, a named
// pipe, a socket or a device is refused (renaming over /dev/full would
// replace the device with a file). A symbolic link is followed, through
// every link of a chain, and the file it ends at is replaced, its
// temporary file made in that file's directory so that the rename stays
// atomic; the links stay as they are. A link whose end does not exist
// (dangling) is refused rather than followed to create a file wherever it
// points, which is seldom what an output flag meant.
package atomicfile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Write creates or replaces path with what write writes. write's writer is
// buffered; it returns ctx.Err() (wrapped) once ctx is done, so a long
// write stops at the next Write call. The file gets mode 0644.
func Write(ctx context.Context, path string, write func(w io.Writer) error) (err error) {
	target, err := checkTarget(path)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, tempPattern(base))
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		// Also when write panics, which leaves err nil.
		if !renamed {
			f.Close() // a second Close is harmless
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(ctxWriter{ctx, f}, 1<<20)
	if err := write(bw); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("writing %s: syncing: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	renamed = true
	return syncDir(dir)
}

// tempPattern is the os.CreateTemp pattern of a temporary file for base:
// ".base.tmp-*", with base cut short enough (at a character boundary)
// that the name fits in the 255 bytes a file system allows whenever base
// does.
func tempPattern(base string) string {
	const maxBase = 255 - len("..tmp-") - 20 // CreateTemp's random part has at most 20 digits
	if len(base) > maxBase {
		n := maxBase
		for n > 0 && !utf8.RuneStart(base[n]) {
			n--
		}
		base = base[:n]
	}
	return "." + base + ".tmp-*"
}

// ctxWriter fails every write once ctx is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// syncDir makes a rename in dir durable. A directory whose file system
// cannot sync it (fsync fails with EINVAL) has nothing more to make
// durable, and is no error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, syscall.EINVAL) { // some file systems cannot sync a directory
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// checkTarget returns the path Write replaces for path: path itself, or
// where its symbolic links end. It refuses an empty name, a target that
// exists and is not a regular file (a directory, a named pipe, a socket,
// a device), a dangling link and a link that cannot be followed (a loop).
// A path that cannot be examined otherwise (a missing directory, say) is
// returned as it is, for the write or CheckWritable to report.
func checkTarget(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("empty file name")
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return path, nil
	}
	target := path
	if fi.Mode()&fs.ModeSymlink != 0 {
		if target, err = filepath.EvalSymlinks(path); err != nil {
			// /dev/stdout of a pipe ends at /proc/self/fd/1, a link whose
			// text ("pipe:[123]") names no file, though the kernel opens
			// the pipe through it: what it opens is the target, not a
			// file that does not exist.
			if st, serr := os.Stat(path); serr == nil && !st.Mode().IsRegular() {
				return "", NotRegular(path, st.Mode())
			}
			if errors.Is(err, fs.ErrNotExist) {
				if dest, rerr := os.Readlink(path); rerr == nil {
					return "", fmt.Errorf("%s is a symbolic link to %s, which does not exist", path, dest)
				}
			}
			return "", fmt.Errorf("cannot follow the symbolic link %s: %w", path, err)
		}
		if fi, err = os.Lstat(target); err != nil {
			return "", fmt.Errorf("cannot follow the symbolic link %s: %w", path, err)
		}
	}
	if err := NotRegular(path, fi.Mode()); err != nil {
		return "", err
	}
	return target, nil
}

// NotRegular is the error for path whose mode m is not a regular file's
// ("x is a directory", "x is not a regular file (a named pipe)"), which
// errors.Is takes for ErrNotRegular; nil for a regular file. Outputs
// (checkTarget), inputs (cli.Readable) and ReadRegular share it.
func NotRegular(path string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	return notRegular{path, m}
}

type notRegular struct {
	path string
	mode fs.FileMode
}

func (e notRegular) Error() string {
	if e.mode.IsDir() {
		return e.path + " is a directory"
	}
	return fmt.Sprintf("%s is not a regular file (%s)", e.path, FileKind(e.mode))
}

func (e notRegular) Is(target error) bool { return target == ErrNotRegular }

// FileKind names what a file that is not a regular one is ("a named
// pipe"), for messages that refuse it.
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a file"
}

// CheckWritable reports, without touching path, whether Write could
// create or replace it: path is a regular file, a symbolic link to one
// (the file is checked) or does not exist, and a temporary file can be
// created (and is removed again) in the directory of the file Write would
// replace. Programs call it on their output paths before any work, so a
// bad path fails at once rather than after hours of it.
func CheckWritable(path string) error {
	target, err := checkTarget(path)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot write %s: directory %s does not exist", path, dir)
	case err != nil:
		return fmt.Errorf("cannot write %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("cannot write %s: %s is not a directory", path, dir)
	}
	f, err := os.CreateTemp(dir, tempPattern(base))
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot write %s: cannot create files in %s: %w", path, dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// RemoveStale removes the temporary files Write left beside path (the
// file a symbolic link names) when its process died in the middle of a
// write (SIGKILL, a crash, a power loss): ".base.tmp-<digits>". The
// caller must know that no write of path is in progress (train-gpt holds
// its outputs' locks). It returns the names removed.
func RemoveStale(path string) ([]string, error) {
	target := path
	if t, err := filepath.EvalSymlinks(path); err == nil {
		target = t
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	prefix := strings.TrimSuffix(tempPattern(base), "*")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil {
			return removed, err
		}
		removed = append(removed, p)
	}
	return removed, nil
}

// ErrNotRegular is what NotRegular's errors are taken for (errors.Is).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is what ReadRegular's error for a file larger than its
// limit is taken for (errors.Is).
var ErrTooLarge = errors.New("file too large")

// ReadRegular reads the whole of path, which must be a regular file (a
// symbolic link to one is followed) of at most limit bytes: os.ReadFile
// of a device such as /dev/zero never ends, growing its buffer without
// bound, and of a named pipe blocks; and a larger file (a sparse one of
// a terabyte) is an error naming it and both sizes, wrapping
// ErrTooLarge, rather than an allocation of its size, which Go cannot
// turn into an error: the process dies. Loaders of model files call it.
func ReadRegular(path string, limit int64) ([]byte, error) {
	f, fi, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d bytes it may be: %w", path, fi.Size(), limit, ErrTooLarge)
	}
	// Read to the end, as os.ReadFile does, not just the size stat gave: a
	// file that grew since was cut short without a word, and files such
	// as /proc's, which stat as empty, read as nothing. A byte past limit
	// is read to tell a file that grew past it (none past math.MaxInt64,
	// where limit+1 would wrap and read nothing).
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, min(limit, math.MaxInt64-1)+1)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(buf.Len()) > limit {
		return nil, fmt.Errorf("%s grew past the %d bytes it may be while it was read: %w", path, limit, ErrTooLarge)
	}
	return buf.Bytes(), nil
}

// OpenRegular opens path for reading when it is a regular file (a
// symbolic link to one is followed), and returns the open file's
// FileInfo; anything else is NotRegular's error.
func OpenRegular(path string) (*os.File, os.FileInfo, error) {
	// Looked at before it is opened: opening a named pipe blocks until a
	// writer comes; and again once open, in case it was replaced between.
	fi, err := os.Stat(path)
	if err == nil && !fi.Mode().IsRegular() {
		return nil, nil, NotRegular(path, fi.Mode())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	if fi, err = f.Stat(); err == nil {
		err = NotRegular(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
