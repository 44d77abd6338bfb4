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

// TestRandomRanksGradientsMatchMean: 1-3 ranks, random bucket sizes,
// empty parameters, each parameter used or not by each rank in each
// micro-step, NoSync accumulation, with and without overlap: every rank's
// gradient is the mean over ranks (no gradient where no rank used the
// parameter).
func TestRandomRanksGradientsMatchMean(t *testing.T) {
	for trial := range 40 {
		rng := rand.New(rand.NewPCG(uint64(trial), 1))
		n := 1 + rng.IntN(3)
		k := 1 + rng.IntN(6)
		sizes := make([]int, k)
		for i := range sizes {
			sizes[i] = rng.IntN(5) // may be 0
		}
		bb := int64(1 + rng.IntN(40))
		micro := 1 + rng.IntN(3)
		// use[r][m][i], coef
		use := make([][][]bool, n)
		coef := make([][][]float64, n)
		for r := range n {
			use[r] = make([][]bool, micro)
			coef[r] = make([][]float64, micro)
			for m := range micro {
				use[r][m] = make([]bool, k)
				coef[r][m] = make([]float64, k)
				for i := range k {
					use[r][m][i] = rng.IntN(3) > 0
					coef[r][m][i] = float64(1 + rng.IntN(7))
				}
			}
		}
		for _, noOv := range []bool{false, true} {
			t.Run(fmt.Sprintf("trial%d/noov%v", trial, noOv), func(t *testing.T) {
				got := make([][][]float32, n)
				errs := runRanks(t, n, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
					r := coll.Rank()
					ps := make([]*nn.Parameter, k)
					for i := range k {
						v, err := tensor.NewKept(tensor.CPU(), tensor.Float32, memory.RoleParameter, sizes[i])
						if err != nil {
							return err
						}
						v.Fill(1)
						ps[i] = &nn.Parameter{Var: autograd.Param(v, fmt.Sprint("p", i)), Name: fmt.Sprint("p", i)}
					}
					defer nn.Release(ps)
					d, err := dist.New(coll, ps, dist.Options{BucketBytes: bb, NoOverlap: noOv})
					if err != nil {
						coll.Abort(err)
						return err
					}
					defer d.Release()
					for step := range 2 {
						nn.ZeroGrad(ps)
						for m := range micro {
							pass := func() error {
								var err error
								c.WithScope(func() {
									var tot *autograd.Var
									for i := range k {
										if !use[r][m][i] {
											continue
										}
										x := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, coef[r][m][i], sizes[i]))
										s := autograd.Sum(autograd.Mul(x, ps[i].Var), false)
										if tot == nil {
											tot = s
										} else {
											tot = autograd.Add(tot, s)
										}
									}
									if tot != nil {
										err = tot.Backward()
									}
								})
								return err
							}
							var err error
							if m < micro-1 {
								err = d.NoSync(pass)
							} else {
								err = pass()
							}
							if err != nil {
								d.Abort(err)
								return err
							}
						}
						if err := d.SyncGradients(); err != nil {
							return err
						}
						_ = step
					}
					out := make([][]float32, k)
					for i, p := range ps {
						if p.Grad != nil {
							out[i] = p.Grad.Float32s()
							if out[i] == nil {
								out[i] = []float32{}
							}
						}
					}
					got[r] = out
					nn.ZeroGrad(ps)
					return nil
				})
				for r, err := range errs {
					require.NoError(t, err, "rank %d", r)
				}
				for i := range k {
					any := false
					sum := 0.0
					for r := range n {
						for m := range micro {
							if use[r][m][i] {
								any = true
								sum += coef[r][m][i]
							}
						}
					}
					for r := range n {
						if !any {
							require.Nil(t, got[r][i], "rank %d p%d", r, i)
							continue
						}
						require.NotNil(t, got[r][i], "rank %d p%d", r, i)
						require.Len(t, got[r][i], sizes[i])
						for _, g := range got[r][i] {
							require.InDelta(t, sum/float64(n), float64(g), 1e-5, "rank %d p%d", r, i)
						}
					}
				}
			})
		}
	}
}
