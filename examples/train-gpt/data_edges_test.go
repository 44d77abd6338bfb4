package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
)

// -data that is not a regular file is refused with an error naming it:
// a named pipe with no writer used to block forever, and a device that
// never ends (/dev/zero, or a .bin link to it) was read until the process
// ran out of memory.
func TestDataNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.txt")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	zeroBin := filepath.Join(dir, "zero.bin")
	require.NoError(t, os.Symlink("/dev/zero", zeroBin))
	byteTok := mustTokenizer(t, "byte")
	for path, msg := range map[string]string{
		fifo:        "not a regular file (a named pipe)",
		"/dev/zero": "not a regular file (a device)",
		zeroBin:     "not a regular file (a device)",
	} {
		errc := make(chan error, 1)
		go func() {
			_, err := loadTokens(path, byteTok, 64, nil)
			errc <- err
		}()
		select {
		case err := <-errc:
			require.ErrorContains(t, err, "-data "+path+": "+msg)
		case <-time.After(10 * time.Second):
			if path == fifo { // let the reader go: a writer that closes at once
				if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
					w.Close()
				}
			}
			t.Fatalf("loadTokens(%s) still reading after 10 s", path)
		}
	}
	// The program refuses them up front, as a bad flag (exit 2), before
	// opening them: a pipe with no writer would block the open.
	for path, want := range map[string]string{"/dev/zero": "a device", fifo: "a named pipe"} {
		o, err := parseFlags([]string{"-data", path, "-steps", "1", "-batch", "2", "-device", "cpu", "-quiet", "-out", ""})
		require.NoError(t, err)
		err = run(o)
		require.ErrorContains(t, err, "-data: "+path+" is not a regular file ("+want+")")
		var ex *cli.ExitError
		require.True(t, errors.As(err, &ex), "%v", err)
		require.Equal(t, 2, ex.Code)
	}
}

// fill draws every window of T+1 tokens, the last one too (the source's
// last token is a target): with T+2 tokens there are two windows.
func TestFillDrawsEveryWindow(t *testing.T) {
	const T = 4
	src := []uint16{10, 11, 12, 13, 14, 15} // T+2 tokens: windows at 0 and 1
	const B = 64
	xs, ys := make([]int32, B*T), make([]int32, B*T)
	fill(src, rand.New(rand.NewPCG(1, 2)), xs, ys, B, T)
	starts := map[int32]int{}
	for b := range B {
		o := xs[b*T] - 10
		starts[o]++
		for i := range T {
			require.Equal(t, int32(src[int(o)+i]), xs[b*T+i])
			require.Equal(t, int32(src[int(o)+i+1]), ys[b*T+i])
		}
	}
	require.Len(t, starts, 2, "windows drawn at offsets %v", starts)
}

// A text file read with the byte tokenizer costs its bytes and their
// uint16 ids, not ids of 8 bytes each twice over: a 235 MB text took
// 4.4 GB, so a 1.2 GB one was killed for memory on a 23 GB host.
func TestByteTextMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.txt")
	text := make([]byte, 8<<20)
	for i := range text {
		text[i] = byte(i * 7)
	}
	require.NoError(t, os.WriteFile(path, text, 0o644))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := loadTokens(path, mustTokenizer(t, "byte"), 64, nil)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Equal(t, len(text), len(d.train)+len(d.test))
	for i, id := range slices.Concat(d.train, d.test) {
		if id != uint16(text[i]) {
			t.Fatalf("token %d is %d, want the byte %d", i, id, text[i])
		}
	}
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4*len(text)), "bytes allocated to read %d bytes", len(text))
}

// A state saved on a -data file that has changed since (text appended:
// the old held-out tail now trains) is refused on -resume, as a state of
// another run is.
func TestResumeRefusesChangedData(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.txt")
	var sb strings.Builder
	for i := range 800 {
		fmt.Fprintf(&sb, "%d\n", i)
	}
	require.NoError(t, os.WriteFile(text, []byte(sb.String()), 0o644))
	state := filepath.Join(dir, "s.state.safetensors")
	args := []string{"-data", text, "-steps", "4", "-batch", "2", "-device", "cpu", "-quiet", "-out", "", "-state", state,
		"-eval-every", "0", "-sample", "0", "-loss-plot", "off"}
	o, err := parseFlags(args)
	require.NoError(t, err)
	o.stopAt = 2
	require.Error(t, run(o)) // interrupted after step 2, its state saved
	f, err := os.OpenFile(text, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(strings.Repeat("more text\n", 100))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	o, err = parseFlags(append(args, "-resume", state))
	require.NoError(t, err)
	require.ErrorContains(t, run(o), "has changed since the state was saved")
}
