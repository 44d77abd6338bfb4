package memory_test

import (
	"errors"
	"testing"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// TestCloseZeroesEveryStatistic: Close with live, pending and quarantined blocks
// on every tier gives every byte back: the statistics' currents are zero
// and the budget holds nothing.
func TestCloseZeroesEveryStatistic(t *testing.T) {
	for _, mode := range []memory.SegmentMode{memory.SegmentsClassic, memory.SegmentsExpandable} {
		b := memory.NewHostBudget(256<<20, "test")
		ss := memtest.NewStreamSync()
		m := memory.NewBudgetHostManager(memory.Config{Segments: mode, StreamSync: ss}, b)
		var as []*memory.Allocation
		for r := range memory.NumRoles {
			for _, n := range []int64{100, 5000, 3 << 20} {
				a, err := m.AllocStream(n, r, memory.Stream(1+int(r)%2))
				if err != nil {
					t.Fatal(err)
				}
				as = append(as, a)
			}
		}
		// pending
		for _, a := range as[:4] {
			if err := m.RecordStream(a, 7); err != nil {
				t.Fatal(err)
			}
			if err := a.Free(); err != nil {
				t.Fatal(err)
			}
		}
		// quarantined
		if err := m.RecordStream(as[4], 8); err != nil {
			t.Fatal(err)
		}
		ss.FailNext(1)
		if err := as[4].Free(); err == nil {
			t.Fatal("want the recording's error")
		}
		if _, err := m.Pool(memory.TierHost).Alloc(12345, 0); err != nil { // a direct block
			t.Fatal(err)
		}
		err := m.Close()
		if !errors.Is(err, memory.ErrLeaked) {
			t.Fatalf("Close: %v", err)
		}
		checkAllZero(t, m, "after Close")
		if used, _ := b.Used(); used != 0 {
			t.Errorf("mode %d: budget holds %d after Close", mode, used)
		}
		if err := ss.Err(); err != nil {
			t.Error(err)
		}
		if n := ss.Outstanding(); n != 0 {
			t.Errorf("%d events outstanding", n)
		}
	}
}
