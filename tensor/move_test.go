package tensor_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

// TestMoveTo moves a tensor to host memory and back while ops use it: the
// values never change, the storage lands in the tier asked for, views and
// aliases follow their storage, and the bytes counted as moved are the
// storage's once however often it is named.
func TestMoveTo(t *testing.T) {
	onDevices(t, func(t *testing.T, dev tensor.Device) {
		// On expandable device memory (the default) the moves copy by
		// kernel on the copy stream (session 21 lifted the refusal session
		// 20 had put there); STRATA_EXPANDABLE_SEGMENTS=0 tests classic
		// segments and the copy engines.
		tensor.WithScope(func() {
			rng := rand.New(rand.NewPCG(3, 4))
			x := tensor.RandN(dev, tensor.Float32, rng, 1, 64, 1024)
			want := tensor.Add(x, x).Float32s()
			st := dev.Memory().Stats()
			before := st.AsyncMoves.Bytes + st.Migrations.Bytes

			require.NoError(t, tensor.MoveTo(memory.TierStaging, x, x.T(), x.Alias()))
			assert.Equal(t, memory.TierStaging, x.Allocation().Tier())
			// Read where it is (over the bus on a GPU), and written while the
			// device's stream reuses the memory it left.
			for range 4 {
				tensor.RandN(dev, tensor.Float32, rng, 1, 64, 1024)
			}
			assert.Equal(t, want, tensor.Add(x, x).Float32s())

			require.NoError(t, tensor.MoveTo(memory.TierDevice, x.T()))
			assert.Equal(t, memory.TierDevice, x.Allocation().Tier())
			assert.Equal(t, want, tensor.Add(x, x).Float32s())
			require.NoError(t, tensor.MoveTo(memory.TierDevice, x), "already there: nothing to do")
			require.NoError(t, dev.Synchronize())
			st = dev.Memory().Stats()
			assert.Equal(t, 2*x.Bytes(), st.AsyncMoves.Bytes+st.Migrations.Bytes-before)
		})
	})
}

// TestMoveToBadInput: a released tensor and an unknown tier are errors
// naming the op.
func TestMoveToBadInput(t *testing.T) {
	x := tensor.Zeros(tensor.CPU(), tensor.Float32, 4)
	requireOpError(t, catch(func() { _ = tensor.MoveTo(memory.NumTiers, x) }), "MoveTo")
	x.Release()
	err := catch(func() { _ = tensor.MoveTo(memory.TierStaging, x) })
	requireOpError(t, err, "MoveTo")
	require.ErrorIs(t, err, tensor.ErrReleased) // as every op names a released tensor
	err = catch(func() { _ = tensor.MoveTo(memory.TierStaging, nil) })
	requireOpError(t, err, "MoveTo")
	require.ErrorIs(t, err, tensor.ErrArgument)
}

// TestMoveToOutOfMemory leaves a tensor the target tier cannot take where
// it is and moves the others; the error wraps the OOMError.
func TestMoveToOutOfMemory(t *testing.T) {
	var limits [memory.NumTiers]int64
	limits[memory.TierDevice] = 4 << 20
	dev := tensor.NewCPUDevice(memory.NewHostManager(memory.Config{Limits: limits}))
	tensor.WithScope(func() {
		a := tensor.Full(dev, tensor.Float32, 1.5, 512, 1024) // 2 MiB
		b := tensor.Full(dev, tensor.Float32, 2.5, 256, 1024) // 1 MiB
		require.NoError(t, tensor.MoveTo(memory.TierStaging, a, b))
		big := tensor.Zeros(dev, tensor.Float32, 768, 1024) // 3 MiB: a no longer fits
		err := tensor.MoveTo(memory.TierDevice, a, b)
		var oom *memory.OOMError
		require.ErrorAs(t, err, &oom)
		assert.Equal(t, memory.TierStaging, a.Allocation().Tier(), "a stays put")
		assert.Equal(t, memory.TierDevice, b.Allocation().Tier(), "b is moved all the same")
		assert.Equal(t, float32(1.5), a.Float32s()[12345])
		assert.Equal(t, float32(2.5), b.Float32s()[777])
		big.Release()
	})
}

func catch(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err, _ = r.(error)
			if err == nil {
				panic(r)
			}
		}
	}()
	fn()
	return nil
}
