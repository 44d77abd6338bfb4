package tensor

import (
	"math"

	"github.com/strata-ml/strata/cuda"
)

// Optimizer steps (kernels/optim.cuh) repeat cpukern.AdamW's and
// cpukern.SGD's arithmetic with explicitly rounded operations: float32
// AdamW in float32 as PyTorch, SGD and float64 AdamW in float64.

func (b cudaBackend) adamw(p, g, m, v *Tensor, lr, beta1, beta2, eps, wd float64, step int) {
	d, n := b.d, p.Numel()
	f := floatIndex("AdamW", p.dtype)
	if n == 0 {
		return
	}
	// The step's constants, computed as cpukern.AdamW does; float32 takes
	// them rounded to float32 (argT), float64 with bc2Sqrt folded in.
	decay, w1, w2 := 1-lr*wd, 1-beta1, 1-beta2
	stepSize := lr / (1 - math.Pow(beta1, float64(step)))
	bc2Sqrt := math.Sqrt(1 - math.Pow(beta2, float64(step)))
	if f == kF64 {
		stepSize, eps = stepSize*bc2Sqrt, eps*bc2Sqrt
	}
	lerpLow := boolArg(float32(w1) < 0.5) // torch.lerp's two forms (float32 only)
	d.launch1("AdamW", d.k.adamw[f], n, func(a *cuda.Args) {
		a.Ptr(devPtr(p)).Ptr(devPtr(g)).Ptr(devPtr(m)).Ptr(devPtr(v)).Int64(int64(n))
		for _, c := range [...]float64{decay, w1, beta2, w2, stepSize, bc2Sqrt, eps} {
			argT(a, f, c)
		}
		a.Int32(lerpLow)
	})
}

func (b cudaBackend) sgd(p, g, buf *Tensor, lr, momentum, wd float64, nesterov bool) {
	d, n := b.d, p.Numel()
	f := floatIndex("SGD", p.dtype)
	if n == 0 {
		return
	}
	d.launch1("SGD", d.k.sgd[f], n, func(a *cuda.Args) {
		a.Ptr(devPtr(p)).Ptr(devPtr(g)).Ptr(devPtr(buf)).Int64(int64(n)).
			Float64(lr).Float64(momentum).Float64(wd).Int32(boolArg(nesterov))
	})
}
