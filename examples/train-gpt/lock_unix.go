//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/internal/cli"
)

// Two runs writing the same outputs at once would interleave their loss
// logs' lines and leave the weights of whichever finished last. A run
// holds an exclusive lock (flock) on a file beside each of its outputs
// (-out, -state, -loss-log, -loss-plot: .NAME.lock) for as long as it
// runs; a second run on any of them is refused. The kernel releases the
// lock of a process that dies; the file, left behind then, is reused.

// lockOutputs locks o's outputs and returns the function that unlocks
// them (and removes the lock files), or a *cli.ExitError (status 2) naming
// the run that holds one.
func lockOutputs(o *options) (release func(), err error) {
	var held []*os.File
	release = func() {
		for _, f := range held {
			os.Remove(f.Name()) // while locked: a run that opens it now finds another file (lockFile)
			f.Close()
		}
		held = nil
	}
	for _, fp := range [][2]string{{"-state", o.state}, {"-out", o.out}, {"-loss-log", o.lossLog}, {"-loss-plot", o.lossPlot}} {
		if fp[1] == "" {
			continue
		}
		f, err := lockFile(lockPath(fp[1]))
		if err != nil {
			release()
			return nil, &cli.ExitError{Code: 2, Msg: fmt.Sprintf("%s %s: %v", fp[0], fp[1], err)}
		}
		held = append(held, f)
		// Held: no other run writes fp[1] now; a temporary file of it is
		// a dead run's (killed in the middle of a save), as large as the
		// file, hidden, and never removed otherwise.
		if gone, err := atomicfile.RemoveStale(fp[1]); err == nil && len(gone) > 0 {
			fmt.Fprintf(os.Stderr, "train-gpt: removed %d temporary file(s) a run that died while writing %s left: %s\n", len(gone), fp[1], strings.Join(gone, ", "))
		}
	}
	return release, nil
}

// lockPath is the lock file of output path: .NAME.lock beside it (beside
// the file a symbolic link names).
func lockPath(path string) string {
	if t, err := filepath.EvalSymlinks(path); err == nil {
		path = t
	}
	dir, base := filepath.Split(path)
	return filepath.Join(dir, "."+base+".lock")
}

// lockFile opens and locks path, and writes this process's id there.
func lockFile(path string) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("locking the run's outputs: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if !errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("locking the run's outputs (%s): %w", path, err)
			}
			who := "another train-gpt run"
			if b, rerr := os.ReadFile(path); rerr == nil {
				if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
					who = fmt.Sprintf("another train-gpt run (pid %d)", pid)
				}
			}
			return nil, fmt.Errorf("%s is writing it (it holds the lock %s): wait for it to end, or give this run other outputs", who, path)
		}
		// The holder before may have removed the file after we opened it:
		// locked, it must still be the file at path.
		var a, b syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &a) != nil || syscall.Stat(path, &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return f, nil
	}
}
