// Package atomicfile writes files so that a reader sees the old file or
// the whole new one, never a part, and a crash or power loss right after
// Write returns keeps the new one: the bytes go to a temporary file in the
// same directory, which is synced, renamed over the target, and the
// directory synced. On any failure (a panic of the write function
// included), or when the caller's context is cancelled (an interrupt), the
// temporary file is removed and the target is left as it was; the one
// exception is a failure to sync the directory after the rename, when the
// new file is in place but its rename may not survive a crash.
package atomicfile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// Write creates or replaces path with what write writes. write's writer is
// buffered; it returns ctx.Err() (wrapped) once ctx is done, so a long
// write stops at the next Write call. The file gets mode 0644.
func Write(ctx context.Context, path string, write func(w io.Writer) error) (err error) {
	if err := checkTarget(path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
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
	if err := os.Rename(tmp, path); err != nil {
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

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) { // some file systems cannot sync a directory
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// checkTarget refuses a target that is a directory.
func checkTarget(path string) error {
	if path == "" {
		return fmt.Errorf("empty file name")
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	return nil
}

// CheckWritable reports, without touching path, whether Write could
// create or replace it: path is not a directory, and a temporary file can
// be created (and is removed again) in its directory. Programs call it on
// their output paths before any work, so a bad path fails at once rather
// than after hours of it.
func CheckWritable(path string) error {
	if err := checkTarget(path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
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
