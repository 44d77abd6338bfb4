//go:build !amd64 || purego

package cpukern

// hasExpSIMD is false: no vector exp on this platform or build.
const hasExpSIMD = false

// expShiftSIMD does nothing here; the scalar loop does all elements.
func expShiftSIMD(dst, src []float32, shift float32, acc *[8]float64) int { return 0 }
