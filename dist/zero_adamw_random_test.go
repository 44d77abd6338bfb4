package dist_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// mkParams makes k float32 parameters of the given sizes, seeded.
func mkParams(k int, sizes []int, decay []bool, seed uint64) []*nn.Parameter {
	rng := rand.New(rand.NewPCG(seed, 3))
	ps := make([]*nn.Parameter, k)
	for i := range k {
		v, _ := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, sizes[i])
		vals := make([]float32, sizes[i])
		for j := range vals {
			vals[j] = float32(rng.NormFloat64())
		}
		if sizes[i] > 0 {
			v.CopyFrom(tensor.FromFloat32s(tensor.CPU(), vals, sizes[i]))
		}
		ps[i] = &nn.Parameter{Var: autograd.Param(v, fmt.Sprint("p", i)), Name: fmt.Sprint("p", i), Decay: decay[i]}
	}
	return ps
}

// gradsFor gives the parameters marked in have a gradient that depends on
// the step, and the others none.
func gradsFor(ps []*nn.Parameter, step int, have []bool) {
	for i, p := range ps {
		p.ZeroGrad()
		if !have[i] {
			continue
		}
		n := p.Value.Numel()
		vals := make([]float32, n)
		for j := range vals {
			vals[j] = float32((i+1)*(j+2)*(step+3)%17) - 8
		}
		g, _ := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleGradient, n)
		if n > 0 {
			g.CopyFrom(tensor.FromFloat32s(tensor.CPU(), vals, n))
		}
		p.Grad = g
	}
}

// TestZeroAdamWRandomMatchesAdamW: ZeroAdamW on 1-4 ranks, with random
// missing gradients, decay flags and learning rates, updates every
// parameter bit for bit as nn.AdamW does on one.
func TestZeroAdamWRandomMatchesAdamW(t *testing.T) {
	for trial := range 20 {
		rng := rand.New(rand.NewPCG(uint64(trial), 9))
		n := 1 + rng.IntN(4)
		k := 1 + rng.IntN(5)
		sizes := make([]int, k)
		decay := make([]bool, k)
		for i := range k {
			sizes[i] = rng.IntN(6)
			decay[i] = rng.IntN(2) == 0
		}
		if func() int {
			s := 0
			for _, x := range sizes {
				s += x
			}
			return s
		}() == 0 {
			sizes[0] = 1
		}
		steps := 4
		have := make([][]bool, steps)
		for s := range steps {
			have[s] = make([]bool, k)
			for i := range k {
				have[s][i] = rng.IntN(3) > 0
			}
		}
		// reference
		ref := mkParams(k, sizes, decay, 1)
		opt := nn.NewAdamW(ref, 1e-2, 0.1)
		for s := range steps {
			gradsFor(ref, s, have[s])
			opt.SetLR(1e-2 * float64(s+1))
			require.NoError(t, opt.Step())
		}
		want := flatParams(ref)
		got := make([][]float32, n)
		errs := runRanks(t, n, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			ps := mkParams(k, sizes, decay, 1)
			z, err := dist.NewZeroAdamW(coll, ps, 1e-2, 0.1)
			if err != nil {
				coll.Abort(err)
				return err
			}
			defer z.Release()
			for s := range steps {
				gradsFor(ps, s, have[s])
				z.SetLR(1e-2 * float64(s+1))
				if err := z.Step(); err != nil {
					return err
				}
			}
			got[coll.Rank()] = flatParams(ps)
			return nil
		})
		for r := range n {
			require.NoError(t, errs[r])
			require.True(t, equalBits(want, got[r]), "trial %d rank %d: %v vs %v", trial, r, want, got[r])
		}
	}
}
