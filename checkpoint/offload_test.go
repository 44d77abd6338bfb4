package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestOffloadMatchesPlain: regions that move what they hold to host memory
// give the plain run's loss, gradients and random stream bit for bit,
// with and without a policy, with every Keep and Ahead; the moves happen
// (the manager counts them) and nothing is left behind.
func TestOffloadMatchesPlain(t *testing.T) {
	n := newNet(7)
	defer n.release()
	blocks := []checkpoint.Layer{n.block, n.block, n.block, n.block, n.block}
	c := tensor.NewCtx()
	autograd.SetRandomState(c, 100)
	want := run(t, c, n, true, func(x *autograd.Var) *autograd.Var {
		for _, b := range blocks {
			x = b(x)
		}
		return x
	})
	for _, policy := range []checkpoint.Policy{nil, checkpoint.SaveMatMuls} {
		for _, keep := range []int{-1, 1, 2} {
			for _, ahead := range []int{-1, 1, 3} {
				off := &checkpoint.Offload{Keep: keep, Ahead: ahead}
				o := checkpoint.Options{Policy: policy, Offload: off}
				mem := tensor.CPU().Memory()
				before := mem.Stats().Migrations.Bytes
				c := tensor.NewCtx()
				autograd.SetRandomState(c, 100)
				got := run(t, c, n, true, func(x *autograd.Var) *autograd.Var { return o.Sequential(1, x, blocks...) })
				what := "keep " + itoa(keep) + " ahead " + itoa(ahead)
				if policy != nil {
					what += " selective"
				}
				sameBits(t, want, got, what)
				require.Zero(t, c.BytesInUse(), what)
				assert.Positive(t, mem.Stats().Migrations.Bytes-before, "%s: moved nothing", what)
			}
		}
	}
}

// TestOffloadPlacesTiers follows the tiers through a step: after the
// forward pass every region but the last Keep holds its tensors in the
// staging tier; when backward reaches a region, it and the Ahead regions
// before it are back on the device.
func TestOffloadPlacesTiers(t *testing.T) {
	n := newNet(8)
	defer n.release()
	off := &checkpoint.Offload{Keep: 2, Ahead: 1}
	o := checkpoint.Options{Policy: checkpoint.SaveMatMuls, Offload: off}
	c := tensor.NewCtx()
	var atBackward [][]memory.Tier
	c.WithScope(func() {
		x := autograd.Const(c.Zeros(tensor.CPU(), tensor.Float32, 2, 5, width))
		x = autograd.Add(x, autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 0.5, 2, 5, width)))
		var ins []*autograd.Var
		layer := func(v *autograd.Var) *autograd.Var { return n.block(v) }
		y := x
		for range 4 {
			ins = append(ins, y)
			y = o.Apply(func(in ...*autograd.Var) *autograd.Var { return layer(in[0]) }, y)
		}
		tiers := func() []memory.Tier {
			var ts []memory.Tier
			for _, v := range ins {
				ts = append(ts, v.Value.Allocation().Tier())
			}
			return ts
		}
		assert.Equal(t, []memory.Tier{memory.TierStaging, memory.TierStaging, memory.TierDevice, memory.TierDevice}, tiers(),
			"the last two regions keep theirs")
		regions, largest := off.Regions()
		assert.Equal(t, 4, regions)
		assert.Greater(t, largest, ins[0].Value.Allocation().Size(), "a region holds its input and what the policy saved")
		hook := autograd.Sum(y, false)
		require.NoError(t, hook.Backward())
		atBackward = append(atBackward, tiers())
	})
	require.Len(t, atBackward, 1)
	assert.Equal(t, []memory.Tier{memory.TierDevice, memory.TierDevice, memory.TierDevice, memory.TierDevice}, atBackward[0],
		"every region came back for its backward")
	for _, p := range n.params() {
		p.ZeroGrad()
	}
	require.Zero(t, c.BytesInUse())
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	return string(rune('0' + n))
}

// Regions counts a forward pass's regions and the most bytes one held:
// whole regions hold their input only. A new pass starts the count again.
func TestOffloadRegions(t *testing.T) {
	n := newNet(9)
	defer n.release()
	off := &checkpoint.Offload{}
	got, _ := off.Regions()
	require.Zero(t, got, "no pass yet")
	o := checkpoint.Options{Offload: off}
	for pass := range 2 {
		c := tensor.NewCtx()
		c.WithScope(func() {
			y := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 0.5, 2, 5, width))
			in := y.Value.Allocation().Size()
			for range 3 + pass {
				y = o.Apply(func(in ...*autograd.Var) *autograd.Var { return n.block(in[0]) }, y)
			}
			regions, largest := off.Regions()
			assert.Equal(t, 3+pass, regions, "pass %d", pass)
			assert.Equal(t, in, largest, "pass %d: each region holds its input", pass)
			require.NoError(t, autograd.Sum(y, false).Backward())
		})
		for _, p := range n.params() {
			p.ZeroGrad()
		}
	}
}

// TestOffloadRegionsFewer: a pass with fewer (and smaller) regions than
// the one before it is the one Regions reports once it has run, not the
// larger pass before it.
func TestOffloadRegionsFewer(t *testing.T) {
	n := newNet(9)
	defer n.release()
	off := &checkpoint.Offload{}
	o := checkpoint.Options{Offload: off}
	for pass, k := range []int{4, 2} {
		c := tensor.NewCtx()
		var in int64
		c.WithScope(func() {
			y := autograd.Const(c.Full(tensor.CPU(), tensor.Float32, 0.5, 2, 5-2*pass, width))
			in = y.Value.Allocation().Size()
			for range k {
				y = o.Apply(func(in ...*autograd.Var) *autograd.Var { return n.block(in[0]) }, y)
			}
			require.NoError(t, autograd.Sum(y, false).Backward())
		})
		for _, p := range n.params() {
			p.ZeroGrad()
		}
		regions, largest := off.Regions()
		assert.Equal(t, k, regions, "pass %d", pass)
		assert.Equal(t, in, largest, "pass %d", pass)
	}
}
