//go:build !purego

package cpukern

import "golang.org/x/sys/cpu"

// hasExpSIMD is true where exp_amd64.s can run: AVX2 with FMA
// (x86-64-v3: Intel Haswell, AMD Excavator and later).
var hasExpSIMD = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// expShiftAVX2 is in exp_amd64.s.
//
//go:noescape
func expShiftAVX2(dst, src *float32, n int, shift float32, acc *[8]float64) int

// expShiftSIMD runs the vector exp over a prefix of dst, eight elements
// at a time, stopping before the first block of eight that holds an
// argument outside the fast range (or NaN). It returns how many elements
// it did, adding their float64 values into acc.
func expShiftSIMD(dst, src []float32, shift float32, acc *[8]float64) int {
	n := len(dst) &^ 7
	if !hasExpSIMD || n == 0 {
		return 0
	}
	src = src[:len(dst)]
	return expShiftAVX2(&dst[0], &src[0], n, shift, acc)
}
