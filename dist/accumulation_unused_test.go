package dist_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestAccumulationUnused: accumulation over 3 micro-batches (2 in NoSync), w2 used only in the
// first micro-batch of rank 0, w3 only in the last of rank 1.
func TestAccumulationUnused(t *testing.T) {
	got := overlapBoth(t, 2, 4, func(c *tensor.Ctx, rank int, d *dist.DataParallel, ps []*nn.Parameter) error {
		pass := func(mb int) error {
			h := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 2, 4))
			for i, p := range ps {
				if i == 1 && !(rank == 0 && mb == 0) {
					continue
				}
				if i == 2 && !(rank == 1 && mb == 2) {
					continue
				}
				h = autograd.Mul(h, p.Var)
			}
			return autograd.Sum(h, false).Backward()
		}
		nn.ZeroGrad(ps)
		for mb := range 2 {
			if err := d.NoSync(func() error { return pass(mb) }); err != nil {
				d.Abort(err)
				return err
			}
		}
		if err := pass(2); err != nil {
			d.Abort(err)
			return err
		}
		return d.SyncGradients()
	})
	assert.Equal(t, got[true], got[false])
	assert.Equal(t, got[false][0], got[false][1])
}
