package memory_test

import (
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestMigrateOnReportsQuarantine: when MigrateOn frees the old block
// and the event that must guard it (the copy's stream) cannot be
// recorded, the block is quarantined (out of use until Close), as Free
// reports with an error; MigrateOn must not swallow that error.
func TestMigrateOnReportsQuarantine(t *testing.T) {
	ss := memtest.NewStreamSync()
	m := memory.NewHostManager(memory.Config{StreamSync: ss})
	defer m.Close()
	a, err := m.AllocStream(3<<20, memory.RoleActivation, 1)
	if err != nil {
		t.Fatal(err)
	}
	memtest.Fill(a.Host(), 9)
	ss.FailNext(1) // the old block's event on the copy's stream
	err = m.MigrateOn(a, memory.TierOffload, 2)
	if a.Tier() != memory.TierOffload {
		t.Fatalf("not moved: %v", err)
	}
	if err := memtest.Check(a.Host(), 9); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(); err != nil {
		t.Fatal(err)
	}
	ss.CompleteAll()
	if err := m.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	st := m.Stats()
	if err == nil && st.Total.Active.Current != 0 {
		t.Errorf("MigrateOn returned nil, but %d bytes stay active (quarantined) after everything was freed", st.Total.Active.Current)
	}
}
