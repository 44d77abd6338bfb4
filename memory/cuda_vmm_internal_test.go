package memory

import (
	"testing"

	"github.com/strata-ml/strata/cuda"
)

// vmmContext returns device 0's primary context with expandable segments
// on (the default, whatever the environment says), skipping the test
// without a GPU or without the virtual memory management API.
func vmmContext(t *testing.T) *cuda.Context {
	t.Helper()
	if err := cuda.Init(); err != nil {
		t.Skipf("CUDA unavailable, GPU test skipped: %v", err)
	}
	if n, err := cuda.DeviceCount(); err != nil || n == 0 {
		t.Skip("the CUDA driver sees no device, GPU test skipped")
	}
	c, err := cuda.Device(0).PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvExpandableSegments, "1")
	if _, ok := NewDeviceBackend(c).(VirtualMemory); !ok {
		t.Skip("the device or driver lacks the virtual memory management API")
	}
	return c
}

// TestGPUExpandableInvariantsRandom is TestExpandableInvariantsRandom over
// device memory through the virtual memory API: pages created, mapped,
// lent, unmapped and released by the driver, with the data of each live
// block written and read back on the GPU.
func TestGPUExpandableInvariantsRandom(t *testing.T) {
	c := vmmContext(t)
	at := func(b *Block) [3]cuda.DevicePtr {
		p := cuda.DevicePtr(b.Addr())
		n := int(b.Size())
		return [3]cuda.DevicePtr{p, p.Add(n - 1), p.Add(n / 2)}
	}
	mark := func(b *Block, v byte) {
		for _, p := range at(b) {
			if err := c.MemsetD8(p, v, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	marks := func(b *Block) (out [3]byte) {
		for i, p := range at(b) {
			var one [1]byte
			if err := c.MemcpyDtoH(one[:], p); err != nil {
				t.Fatal(err)
			}
			out[i] = one[0]
		}
		return out
	}
	runExpandableRandom(t, func() Backend { return NewDeviceBackend(c) }, 4, 1500, mark, marks) // 800 steps did not reach the limit of seed 2 on the H200
}

// TestGPUManagerPlansByDefault: a CUDA manager's device tier plans the
// steps by default (PlanDefault resolves to planCUDADefault), none of its
// other tiers, and STRATA_PLAN_STEPS=0 or PlanNone turn it off.
func TestGPUManagerPlansByDefault(t *testing.T) {
	c := vmmContext(t)
	plans := func(cfg Config) (device, host bool) {
		m, err := NewCUDAManager(c, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := m.Close(); err != nil {
				t.Error(err)
			}
		}()
		return m.pools[TierDevice].planner != nil, m.pools[TierHost].planner != nil
	}
	t.Setenv(EnvPlanSteps, "")
	if d, h := plans(Config{}); !d || h {
		t.Errorf("default: device tier plans %v, host tier %v; want true, false", d, h)
	}
	if d, _ := plans(Config{PlanSteps: PlanNone}); d {
		t.Error("PlanNone: the device tier plans")
	}
	t.Setenv(EnvPlanSteps, "0")
	if d, _ := plans(Config{}); d {
		t.Error("STRATA_PLAN_STEPS=0: the device tier plans")
	}
}
