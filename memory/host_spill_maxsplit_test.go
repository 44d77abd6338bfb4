package memory_test

import (
	"testing"

	"github.com/strata-ml/strata/memory"
)

// A CPU manager whose device tier is host memory and that has no offload
// or staging backend: under a spilling policy the device overflow must go
// to host memory (spill.go: "never in plain host memory on a GPU" — this
// is not a GPU).
func TestSpillToHostOnCPUManager(t *testing.T) {
	var cfg memory.Config
	cfg.Policy = memory.HybridPolicy() // Spill: true
	cfg.Limits[memory.TierDevice] = 4 << 20
	m, err := memory.NewManager([]memory.Backend{memory.NewHostBackend(memory.TierHost), memory.NewHostBackend(memory.TierDevice)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.OnSpill(func(memory.SpillEvent) {})
	a, err := m.Alloc(64<<20, memory.RoleActivation)
	if err != nil {
		t.Fatalf("device overflow did not spill to host memory: %v", err)
	}
	defer a.Free()
	if a.Tier() != memory.TierHost || m.Stats().Spills.Count != 1 {
		t.Fatalf("tier %s, spills %d", a.Tier(), m.Stats().Spills.Count)
	}
}

// An expandable pool with a MaxSplitSize hands a small request the whole
// free run it placed it in.
func TestExpandableMaxSplitSizeOversizeBlock(t *testing.T) {
	m := memory.NewHostManager(memory.Config{Segments: memory.SegmentsExpandable, MaxSplitSize: 32 << 20})
	defer m.Close()
	big, err := m.Alloc(50<<20, memory.RoleActivation)
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Free(); err != nil {
		t.Fatal(err)
	}
	small, err := m.Alloc(400<<10, memory.RoleActivation)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	if got := m.Stats().Total.Allocated.Current; got > 1<<20 {
		t.Fatalf("a 400 KiB allocation holds %s allocated", memory.FormatBytes(got))
	}
}
