package tensor

import (
	"math/rand/v2"

	"github.com/strata-ml/strata/memory"
)

// The creation functions in Background, for one-goroutine programs; each
// is the Ctx method of the same name (create.go) on Background().

// New is Background().New.
func New(dev Device, dt DType, role memory.Role, shape ...int) (*Tensor, error) {
	return background.New(dev, dt, role, shape...)
}

// Empty is Background().Empty.
func Empty(dev Device, dt DType, shape ...int) *Tensor { return background.Empty(dev, dt, shape...) }

// Full is Background().Full.
func Full(dev Device, dt DType, v float64, shape ...int) *Tensor {
	return background.Full(dev, dt, v, shape...)
}

// Zeros is Background().Zeros.
func Zeros(dev Device, dt DType, shape ...int) *Tensor { return background.Zeros(dev, dt, shape...) }

// Ones is Background().Ones.
func Ones(dev Device, dt DType, shape ...int) *Tensor { return background.Ones(dev, dt, shape...) }

// Scalar is Background().Scalar.
func Scalar(dev Device, dt DType, v float64) *Tensor { return background.Scalar(dev, dt, v) }

// FromFloat32s is Background().FromFloat32s.
func FromFloat32s(dev Device, data []float32, shape ...int) *Tensor {
	return background.FromFloat32s(dev, data, shape...)
}

// FromFloat64s is Background().FromFloat64s.
func FromFloat64s(dev Device, data []float64, shape ...int) *Tensor {
	return background.FromFloat64s(dev, data, shape...)
}

// FromInt32s is Background().FromInt32s.
func FromInt32s(dev Device, data []int32, shape ...int) *Tensor {
	return background.FromInt32s(dev, data, shape...)
}

// FromFloats is Background().FromFloats.
func FromFloats(dev Device, dt DType, data []float64, shape ...int) *Tensor {
	return background.FromFloats(dev, dt, data, shape...)
}

// FromBytes is Background().FromBytes.
func FromBytes(dev Device, dt DType, data []byte, shape ...int) (*Tensor, error) {
	return background.FromBytes(dev, dt, data, shape...)
}

// RandN is Background().RandN.
func RandN(dev Device, dt DType, rng *rand.Rand, std float64, shape ...int) *Tensor {
	return background.RandN(dev, dt, rng, std, shape...)
}

// RandUniform is Background().RandUniform.
func RandUniform(dev Device, dt DType, rng *rand.Rand, lo, hi float64, shape ...int) *Tensor {
	return background.RandUniform(dev, dt, rng, lo, hi, shape...)
}

// Arange is Background().Arange.
func Arange(dev Device, dt DType, start, n int) *Tensor { return background.Arange(dev, dt, start, n) }
