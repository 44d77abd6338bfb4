package memory

import "testing"

// EnvPoison must reach the CPU device's pools, whose host backends are
// wrapped in a HostBudget (tensor/device.go: NewBudgetHostManager).
func TestPoisonBudgetedHostManager(t *testing.T) {
	defer func(old bool) { poisonFreed = old }(poisonFreed)
	poisonFreed = true
	m := NewBudgetHostManager(Config{Segments: SegmentsClassic}, NewHostBudget(64<<20, "test"))
	defer m.Close()
	a, err := m.Alloc(4096, RoleActivation)
	if err != nil {
		t.Fatal(err)
	}
	h := a.Host()
	if err := a.Free(); err != nil {
		t.Fatal(err)
	}
	if h[0] != 0xFF {
		t.Fatalf("freed block not poisoned under %s=1 (byte %#x)", EnvPoison, h[0])
	}
}
