package dist_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestClientZeroMismatchedSettings: ranks whose ZeroAdamW settings or
// parameters' Decay flags differ would each update its own shard by its
// own rule and all-gather the mixture, silently (the first Step compared
// only the parameters' names, dtypes and shapes); the first Step now
// returns an error wrapping ErrMismatch on every rank.
func TestClientZeroMismatchedSettings(t *testing.T) {
	for name, setup := range map[string]func(rank int, z *dist.ZeroAdamW, ps []*nn.Parameter){
		"learning rate": func(rank int, z *dist.ZeroAdamW, _ []*nn.Parameter) { z.SetLR(1e-2 * float64(rank+1)) },
		"weight decay":  func(rank int, z *dist.ZeroAdamW, _ []*nn.Parameter) { z.WeightDecay = 0.1 * float64(rank) },
		"beta2":         func(rank int, z *dist.ZeroAdamW, _ []*nn.Parameter) { z.Beta2 -= 0.01 * float64(rank) },
		"decay flag": func(rank int, z *dist.ZeroAdamW, ps []*nn.Parameter) {
			z.WeightDecay = 0.1
			ps[0].Decay = rank == 0
		},
	} {
		t.Run(name, func(t *testing.T) {
			errs := runRanks(t, 2, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
				ps := []*nn.Parameter{shaped(t, "a", tensor.Float32, 2, 2), shaped(t, "b", tensor.Float32, 2)}
				z, err := dist.NewZeroAdamW(coll, ps, 1e-2, 0)
				if err != nil {
					coll.Abort(err)
					return err
				}
				defer z.Release()
				setup(coll.Rank(), z, ps)
				if err := setGrads(ps, 1); err != nil {
					coll.Abort(err)
					return err
				}
				return z.Step()
			})
			for r, err := range errs {
				assert.ErrorIs(t, err, dist.ErrMismatch, "rank %d", r)
			}
		})
	}
}
