package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
)

// failWriter fails every write, as stdout on a full disk does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestReportWriteFailure: rows going to a stdout (or a table to a stderr)
// that fails are an error naming it (status 1); they used to be lost with
// status 0.
func TestReportWriteFailure(t *testing.T) {
	rows := []row{{Host: "pinned", Direction: "h2d", Bytes: 1 << 30, BestMS: 19, MedianMS: 20, GBs: 53.7, Device: "cuda:0"}}
	var buf bytes.Buffer
	require.ErrorContains(t, report(failWriter{}, &buf, rows), "writing the results to stdout: no space left on device")
	require.ErrorContains(t, report(&buf, failWriter{}, rows), "writing the table to stderr: no space left on device")
}

// TestSizeErrors: -size's errors speak of a size; they used to speak of a
// budget, "a share such as 50%" and "off", which -size is not.
func TestSizeErrors(t *testing.T) {
	for _, s := range []string{"3", "0", "off", "50%", "0.5", "-1", "lots", "1.5"} {
		_, err := parseFlags([]string{"-size", s}, io.Discard)
		require.Error(t, err, s)
		require.Contains(t, err.Error(), `-size "`+s+`": `, s)
		require.Contains(t, err.Error(), "want a size such as 1GiB, 512MiB or 1073741824: a positive multiple of 4 bytes", s)
		for _, bad := range []string{"budget", "share", "off"} {
			if s != bad {
				require.NotContains(t, strings.ReplaceAll(err.Error(), `"`+s+`"`, ""), bad, s)
			}
		}
	}
	_, err := parseFlags([]string{"-size", "6"}, io.Discard)
	require.ErrorContains(t, err, `-size "6": 6 bytes, not a multiple of 4`)
}

// TestDeviceUnusable: a -device the driver cannot use is refused before
// any work, naming the flag (status 2 in main), not a failure of the
// measurement.
func TestDeviceUnusable(t *testing.T) {
	if cuda.Init() == nil {
		n, err := cuda.DeviceCount()
		require.NoError(t, err)
		require.ErrorContains(t, checkDevice(n), fmt.Sprintf("-device %d: the CUDA driver sees %d GPUs", n, n))
		return
	}
	err := checkDevice(0)
	require.ErrorContains(t, err, "-device 0: no usable GPU: cannot load")
}

// TestSizeWithFraction: a size written with a fraction and a unit
// (1.5GiB, 0.5GiB) is a size, as memory reads it; -size refused any
// value with a decimal point as a share, while 5e-1GiB, the same size,
// was accepted. A share (0.5, 50%) or a fraction of a byte stays refused.
func TestSizeWithFraction(t *testing.T) {
	for s, want := range map[string]int{
		"1.5GiB":  3 << 29,
		"0.5GiB":  1 << 29,
		"5e-1GiB": 1 << 29,
		"4.0GiB":  4 << 30,
		"2.5KiB":  2560,
	} {
		o, err := parseFlags([]string{"-size", s}, io.Discard)
		require.NoError(t, err, s)
		require.Equal(t, want, o.size, s)
	}
	for _, s := range []string{"0.5", "1.5", "50%", "50 %", "0.5%", "4.5"} {
		_, err := parseFlags([]string{"-size", s}, io.Discard)
		require.ErrorContains(t, err, `-size "`+s+`": want a size such as 1GiB`, s)
	}
}
