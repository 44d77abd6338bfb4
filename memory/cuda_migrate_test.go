package memory_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// TestGPUMigrateHostTiersRoundTrip: a CUDA manager used without package
// tensor (so with its own copies, Manager.copyBetween) moves an
// allocation between device memory and each host-resident tier it has
// (the staging tier, the offload tier over pinned and over managed
// memory) and back, on classic and on expandable device memory, keeping
// every byte: the host sees the device's bytes after the move out, and
// the device the host's after the move back. Session 17's driver refused
// copies through pinned memory's device alias into expandable ranges;
// this is the case a user of package memory alone meets.
func TestGPUMigrateHostTiersRoundTrip(t *testing.T) {
	c := gpuContext(t)
	props := c.Properties()
	if !props.CanMapHostMemory {
		t.Skip("the device cannot map host memory")
	}
	for _, seg := range []string{"expandable", "classic"} {
		for _, off := range []string{"pinned", "managed"} {
			for _, tier := range []memory.Tier{memory.TierOffload, memory.TierStaging} {
				if tier == memory.TierStaging && off == "managed" {
					continue // the staging tier does not depend on the offload memory
				}
				t.Run(fmt.Sprintf("%s/%s/%s", seg, off, tier), func(t *testing.T) {
					if off == "managed" && !props.ManagedMemory {
						t.Skip("the device has no managed memory")
					}
					t.Setenv(memory.EnvOffloadMemory, off)
					cfg := memory.Config{}
					if seg == "classic" {
						cfg.Segments = memory.SegmentsClassic
					} else {
						t.Setenv(memory.EnvExpandableSegments, "1")
					}
					m, err := memory.NewCUDAManager(c, cfg)
					require.NoError(t, err)
					defer func() { require.NoError(t, m.Close()) }()
					require.Equal(t, seg == "expandable", m.Pool(memory.TierDevice).Expandable())
					for i, n := range []int{3 << 20, 24 << 20, 5<<20 + 512} {
						a, err := m.Alloc(int64(n), memory.RoleActivation)
						require.NoError(t, err)
						require.Equal(t, memory.TierDevice, a.Tier())
						want := randomBytes(uint64(10+i), n)
						require.NoError(t, c.MemcpyHtoD(cuda.DevicePtr(a.Addr()), want))
						for round := range 3 {
							require.NoError(t, m.Migrate(a, tier), "%d bytes, round %d: device to %s", n, round, tier)
							require.Equal(t, tier, a.Tier())
							require.NoError(t, c.Synchronize())
							require.True(t, bytes.Equal(want, a.Host()), "%d bytes, round %d: the host sees the device's bytes in %s", n, round, tier)
							want = randomBytes(uint64(100*round+i), n)
							copy(a.Host(), want)
							require.NoError(t, m.Migrate(a, memory.TierDevice), "%d bytes, round %d: %s to device", n, round, tier)
							require.Equal(t, memory.TierDevice, a.Tier())
							require.NoError(t, c.Synchronize())
							require.True(t, bytes.Equal(want, readDevice(t, c, a.Addr(), n)), "%d bytes, round %d: the device sees the host's bytes", n, round)
						}
						require.NoError(t, a.Free())
					}
				})
			}
		}
	}
}
