// Command bench-link measures the bus between the host and a GPU in the
// ways the hybrid placement can move offloaded tensors: the copy engines
// from and to pinned host memory and from and to unified memory advised
// to prefer the host (the offload tier's memory), one direction at a time
// and both at once on two streams. It tells whether a device ring fed by
// copy engines would move offloaded optimizer state faster than the
// update kernel reading and writing it over the bus, which memstrategies
// reports as link GB/s (read plus write: 83 GB/s for gpt2-medium's AdamW
// on the H200). It prints one JSON line per row on stdout and a table on
// stderr.
//
//	go run ./examples/bench-link -size 1GiB -reps 5
//
// Exit status: 0, 2 for a bad flag (a -device without a usable GPU too),
// 1 for a failure of the run.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
)

// row is one measurement: bytes moved (both directions together for
// "both") and the best and median time over the repetitions.
type row struct {
	Host      string  `json:"host_memory"` // pinned or managed (preferring the host)
	Direction string  `json:"direction"`   // h2d, d2h or both
	Bytes     int64   `json:"bytes"`
	BestMS    float64 `json:"best_ms"`
	MedianMS  float64 `json:"median_ms"`
	GBs       float64 `json:"gb_s"` // bytes over the median time
	Device    string  `json:"device"`
}

// options are the flags: -size in bytes, -reps and the -device ordinal.
type options struct {
	size, reps, device int
}

// main exits with 0 on success and for -h, 2 for a bad flag (a -device
// the driver cannot use included), 1 for a failure of the measurement or
// of writing its results.
func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-link:", err)
		os.Exit(2)
	}
	if err := checkDevice(o.device); err != nil {
		fmt.Fprintln(os.Stderr, "bench-link:", err)
		os.Exit(2)
	}
	rows, err := measure(cuda.Device(o.device), o.size, o.reps)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-link:", err)
		os.Exit(1)
	}
	if err := report(os.Stdout, os.Stderr, rows); err != nil {
		fmt.Fprintln(os.Stderr, "bench-link:", err)
		os.Exit(1)
	}
}

// maxReps bounds -reps: each repetition moves -size bytes several times
// over, and the times of every one are kept for the median.
const maxReps = 10000

// parseFlags reads and checks the flags; the flag package's own errors
// and the usage go to stderr.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench-link", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.String("size", "1GiB", "bytes each direction moves (a size such as 1GiB or 512MiB)")
	reps := fs.Int("reps", 5, "repetitions of each measurement (the median is reported)")
	ordinal := fs.Int("device", 0, "CUDA device ordinal")
	if err := cli.ParseFlags(fs, args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, cli.UsageHint(fs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	n, err := parseSize(*size)
	if err != nil {
		return options{}, err
	}
	if *reps < 1 || *reps > maxReps {
		return options{}, fmt.Errorf("-reps %d: want 1 to %d", *reps, maxReps)
	}
	if *ordinal < 0 {
		return options{}, fmt.Errorf("-device %d: want a CUDA device ordinal, 0 or more", *ordinal)
	}
	return options{size: int(n), reps: *reps, device: *ordinal}, nil
}

// parseSize reads -size: a byte count with an optional unit (1GiB,
// 1.5GiB, 512MiB, 1073741824), positive and a multiple of 4 bytes (the
// device buffers are filled with 32-bit words). memory.ParseBudget reads
// it, but a budget's other forms (a share, off) mean nothing here, and
// its errors speak of them: the errors are this flag's own. A share is
// refused: a percentage here, and a fraction without a unit (0.5) by
// ParseBudget, which has no whole to take it of; a fraction with a unit
// (1.5GiB) is a size.
func parseSize(s string) (int64, error) {
	const want = "want a size such as 1GiB, 512MiB or 1073741824: a positive multiple of 4 bytes"
	if strings.Contains(s, "%") { // a share (50%): of nothing here
		return 0, fmt.Errorf("-size %q: %s", s, want)
	}
	n, err := memory.ParseBudget(s, 0)
	switch {
	case err != nil || n <= 0:
		return 0, fmt.Errorf("-size %q: %s", s, want)
	case n%4 != 0:
		return 0, fmt.Errorf("-size %q: %d bytes, not a multiple of 4: %s", s, n, want)
	}
	return n, nil
}

// checkDevice opens the CUDA driver and checks that it sees GPU ordinal,
// before any work: a -device it cannot use is a bad flag (status 2).
func checkDevice(ordinal int) error {
	if err := cuda.Init(); err != nil {
		return fmt.Errorf("-device %d: no usable GPU: %s", ordinal, strings.TrimPrefix(err.Error(), "cuda: "))
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return fmt.Errorf("-device %d: no usable GPU: %s", ordinal, strings.TrimPrefix(err.Error(), "cuda: "))
	}
	if ordinal >= n {
		return fmt.Errorf("-device %d: the CUDA driver sees %d GPUs (ordinals from 0)", ordinal, n)
	}
	return nil
}

// buffers is what one measurement copies between: two device buffers,
// two pinned host buffers and two managed ones, size bytes each.
type buffers struct {
	c            *cuda.Context
	size         int
	dev          [2]cuda.DevicePtr
	pinned       [2]unsafe.Pointer // page-locked host memory
	managed      [2]cuda.DevicePtr
	up, down     *cuda.Stream
	freeFns      []func() error
	deviceString string
}

func measure(dev cuda.Device, size, reps int) ([]row, error) {
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		return nil, err
	}
	b := &buffers{c: c, size: size, deviceString: fmt.Sprintf("cuda:%d", int(dev))}
	defer b.free()
	if err := b.alloc(dev); err != nil {
		return nil, err
	}
	var rows []row
	for _, host := range []string{"pinned", "managed"} {
		for _, dir := range []string{"h2d", "d2h", "both"} {
			times := make([]time.Duration, 0, reps)
			for range reps {
				d, err := b.copy(host == "managed", dir)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", host, dir, err)
				}
				times = append(times, d)
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			moved := int64(size)
			if dir == "both" {
				moved *= 2
			}
			med := median(times)
			rows = append(rows, row{Host: host, Direction: dir, Bytes: moved, BestMS: ms(times[0]), MedianMS: ms(med),
				GBs: float64(moved) / med.Seconds() / 1e9, Device: b.deviceString})
		}
	}
	return rows, nil
}

// median is the middle of sorted times (the mean of the two middle ones
// for an even count).
func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func ms(d time.Duration) float64 { return d.Seconds() * 1000 }

// alloc makes the buffers: the managed ones advised to prefer the host
// and to be mapped by the device, as memory's offload backend does, and
// written once by the device so their pages exist (on the host).
func (b *buffers) alloc(dev cuda.Device) error {
	c := b.c
	var err error
	if b.up, err = c.NewStream(); err != nil {
		return err
	}
	b.freeFns = append(b.freeFns, b.up.Destroy)
	if b.down, err = c.NewStream(); err != nil {
		return err
	}
	b.freeFns = append(b.freeFns, b.down.Destroy)
	for i := range 2 {
		if b.dev[i], err = c.MemAlloc(b.size); err != nil {
			return err
		}
		p := b.dev[i]
		b.freeFns = append(b.freeFns, func() error { return c.MemFree(p) })
		hp, host, err := c.MemHostAlloc(b.size, cuda.HostAllocPortable)
		if err != nil {
			return err
		}
		b.freeFns = append(b.freeFns, func() error { return c.MemFreeHost(hp) })
		b.pinned[i] = hp
		for j := range host {
			host[j] = byte(j)
		}
		if b.managed[i], err = c.MemAllocManaged(b.size); err != nil {
			return err
		}
		m := b.managed[i]
		b.freeFns = append(b.freeFns, func() error { return c.MemFree(m) })
		if err := c.MemAdvise(m, b.size, cuda.AdviseSetPreferredLocation, cuda.HostLocation()); err != nil {
			return err
		}
		if err := c.MemAdvise(m, b.size, cuda.AdviseSetAccessedBy, cuda.DeviceLocation(dev)); err != nil {
			return err
		}
		for _, p := range []cuda.DevicePtr{b.dev[i], m} {
			if err := c.MemsetD32Async(p, 0x3f800000, b.size/4, b.up); err != nil {
				return err
			}
		}
	}
	return b.up.Synchronize()
}

// copy moves size bytes host to device (up stream), device to host (down
// stream), or both at once, between the device buffers and the pinned
// (cuMemcpyHtoDAsync, cuMemcpyDtoHAsync) or managed (cuMemcpyDtoDAsync:
// unified memory has device addresses) ones, and returns the wall time
// until both streams are done.
func (b *buffers) copy(managed bool, dir string) (time.Duration, error) {
	c := b.c
	start := time.Now()
	if dir == "h2d" || dir == "both" {
		var err error
		if managed {
			err = c.MemcpyDtoDAsync(b.dev[0], b.managed[0], b.size, b.up)
		} else {
			err = c.MemcpyHtoDAsyncPtr(b.dev[0], b.pinned[0], b.size, b.up)
		}
		if err != nil {
			return 0, err
		}
	}
	if dir == "d2h" || dir == "both" {
		var err error
		if managed {
			err = c.MemcpyDtoDAsync(b.managed[1], b.dev[1], b.size, b.down)
		} else {
			err = c.MemcpyDtoHAsyncPtr(b.pinned[1], b.dev[1], b.size, b.down)
		}
		if err != nil {
			return 0, err
		}
	}
	if err := b.up.Synchronize(); err != nil {
		return 0, err
	}
	if err := b.down.Synchronize(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func (b *buffers) free() {
	for i := len(b.freeFns) - 1; i >= 0; i-- {
		if err := b.freeFns[i](); err != nil {
			fmt.Fprintln(os.Stderr, "bench-link: freeing:", err)
		}
	}
}

// report writes one JSON line a row to jsonOut (stdout) and the table
// to table (stderr); a write that fails is an error naming the output:
// the results are not lost silently.
func report(jsonOut, table io.Writer, rows []row) error {
	var jsonErr, tableErr error
	_, tableErr = fmt.Fprintf(table, "| host memory | direction | bytes | best ms | median ms | GB/s |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if jsonErr == nil {
			_, jsonErr = fmt.Fprintln(jsonOut, string(b))
		}
		if tableErr == nil {
			_, tableErr = fmt.Fprintf(table, "| %s | %s | %s | %.2f | %.2f | %.1f |\n", r.Host, r.Direction, memory.FormatBytes(r.Bytes), r.BestMS, r.MedianMS, r.GBs)
		}
	}
	if jsonErr != nil {
		return fmt.Errorf("writing the results to stdout: %w", jsonErr)
	}
	if tableErr != nil {
		return fmt.Errorf("writing the table to stderr: %w", tableErr)
	}
	return nil
}
