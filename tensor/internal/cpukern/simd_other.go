//go:build !amd64 || purego

package cpukern

import "github.com/strata-ml/strata/tensor/internal/ops"

// hasSIMD is false: no vector kernels on this platform or build; the
// scalar loops do all elements.
const hasSIMD = false

func expShiftSIMD(dst, src []float32, shift float32, acc *[8]float64) int { return 0 }

func geluSIMD(dst, src []float32) int { return 0 }

func geluBackwardSIMD(dx, x, dy []float32) int { return 0 }

// setSIMD has nothing to switch here.
func setSIMD(on bool) bool { return false }

func vvSIMD(op ops.BinaryOp, d, a, b []float32) int { return 0 }

func vsSIMD(op ops.BinaryOp, d, a []float32, s float32) int { return 0 }

func svSIMD(op ops.BinaryOp, d []float32, s float32, b []float32) int { return 0 }

func axpySIMD(d []float32, alpha float32, x []float32) int { return 0 }
