package memory_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// TestGPUSpillToOffload: under the hybrid policy, an allocation past the
// device budget lands in host-resident memory that the GPU reads and
// writes (managed, or mapped page-locked with STRATA_OFFLOAD_MEMORY=pinned),
// is reported once, and beyond the device's own memory too.
func TestGPUSpillToOffload(t *testing.T) {
	for _, kind := range []string{"managed", "pinned"} {
		t.Run(kind, func(t *testing.T) {
			t.Setenv(memory.EnvOffloadMemory, kind)
			testSpillToOffload(t, kind == "pinned")
		})
	}
}

// TestOffloadMemoryEnv: a value of STRATA_OFFLOAD_MEMORY other than
// managed or pinned is refused by name before any GPU is asked.
func TestOffloadMemoryEnv(t *testing.T) {
	t.Setenv(memory.EnvOffloadMemory, "pinnned")
	_, err := memory.NewCUDAManager(new(cuda.Context), memory.Config{})
	require.ErrorIs(t, err, memory.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `STRATA_OFFLOAD_MEMORY="pinnned"`)
}

func testSpillToOffload(t *testing.T, pinned bool) {
	c := gpuContext(t)
	if !c.Properties().ManagedMemory {
		t.Skip("the device has no managed memory")
	}
	m, err := memory.NewCUDAManager(c, memory.Config{Limits: [memory.NumTiers]int64{memory.TierDevice: 64 * MiB}})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	var events []memory.SpillEvent
	m.OnSpill(func(e memory.SpillEvent) { events = append(events, e) })

	a, err := m.Alloc(40*MiB, memory.RoleActivation)
	require.NoError(t, err)
	assert.Equal(t, memory.TierDevice, a.Tier())
	const n = 100 << 20
	b, err := m.AllocOp(int64(n), memory.RoleActivation, 0, "test")
	require.NoError(t, err, "the hybrid policy spills past the budget")
	require.Equal(t, memory.TierOffload, b.Tier())
	require.Len(t, events, 1)
	t.Log(events[0])
	assert.Equal(t, pinned, m.HostPinned(memory.TierOffload))
	if pinned {
		assert.Contains(t, m.Summary(), c.Device().String()+" pinned")
	}

	// The GPU writes the spilled bytes and reads them back; the host sees
	// the same bytes through the managed mapping.
	want := randomBytes(5, n)
	require.NoError(t, c.MemcpyHtoD(cuda.DevicePtr(b.Addr()), want))
	assert.True(t, bytes.Equal(want, deviceCopy(t, c, b.Addr(), n)))
	require.NoError(t, c.Synchronize())
	assert.True(t, bytes.Equal(want, b.Host()))

	s := m.Stats()
	assert.Equal(t, int64(1), s.Spills.Count)
	assert.LessOrEqual(t, s.Tiers[memory.TierDevice].Reserved.Peak, int64(64*MiB))
	t.Log("\n" + m.Summary())
	require.NoError(t, a.Free())
	require.NoError(t, b.Free())
}
