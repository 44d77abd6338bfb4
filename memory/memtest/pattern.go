package memtest

import "fmt"

// Fill writes a pattern derived from seed into b: every byte of buffers up
// to 64 KiB; the first and last 4 KiB and the first 8 bytes of every 64 KiB
// of larger ones. Any overlap of two filled buffers shows (the edges are
// whole), and so does a stray write over a sampled word, without faulting
// in every page of large buffers.
func Fill(b []byte, seed byte) {
	forPattern(b, func(i int) { b[i] = pattern(i, seed) })
}

// Check verifies what Fill wrote and names the first byte that differs.
func Check(b []byte, seed byte) error {
	var err error
	forPattern(b, func(i int) {
		if err == nil && b[i] != pattern(i, seed) {
			err = fmt.Errorf("memtest: byte %d of %d is %#x, want %#x (pattern seed %d)", i, len(b), b[i], pattern(i, seed), seed)
		}
	})
	return err
}

func pattern(i int, seed byte) byte { return byte(i*131+i>>8) ^ seed }

func forPattern(b []byte, f func(i int)) {
	const whole, edge, stride = 64 << 10, 4 << 10, 64 << 10
	if len(b) <= whole {
		for i := range b {
			f(i)
		}
		return
	}
	for i := range edge {
		f(i)
		f(len(b) - 1 - i)
	}
	for i := edge; i < len(b)-edge; i += stride {
		for j := i; j < i+8; j++ {
			f(j)
		}
	}
}
