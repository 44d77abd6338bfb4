package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHistorySeqWrap: a block's stamp of its allocation event (Block.hist,
// 32 bits) is the event's Seq mod 2^32-1, plus one, so that it never
// wraps to 0, the mark of a block allocated while nothing recorded.
// Taken mod 2^32 (before session 40; a reviewer helper found it), the
// allocation at Seq 2^32-1 stamped 0: its free named no allocation and
// no op, and Snapshot called the block unrecorded, once every 2^32
// events of a long recorded run. Blocks allocated on either side of
// each modulus, freed after it, name their allocations.
func TestHistorySeqWrap(t *testing.T) {
	for _, base := range []uint64{1<<32 - 1, 1<<32 - 4, 1<<33 - 6, 1<<33 - 2, 5<<32 - 3} {
		m := NewHostManager(Config{Segments: SegmentsClassic})
		w, err := m.Alloc(1000, RoleActivation) // the segment, reserved before
		require.NoError(t, err)
		require.NoError(t, w.Free())
		m.RecordHistory(0)
		m.mu.Lock()
		m.hist.n, m.hist.first = base, base // as after base events of earlier recordings
		m.mu.Unlock()
		var as []*Allocation
		for i := range 6 {
			a, err := m.AllocOp(100, RoleActivation, 0, string(rune('a'+i)))
			require.NoError(t, err)
			as = append(as, a)
		}
		for _, ts := range m.Snapshot().Tiers {
			for _, s := range ts.Segments {
				for _, b := range s.Blocks {
					if b.Live {
						assert.True(t, b.Recorded, "base %#x: the live block at %#x is recorded", base, b.Addr)
					}
				}
			}
		}
		for _, a := range as {
			require.NoError(t, a.Free())
		}
		h := m.History()
		require.Len(t, h.Events, 12)
		for _, e := range h.Events[6:] {
			if assert.NotEmpty(t, e.Op, "base %#x: the free of seq %d names no op (AllocSeq %#x)", base, e.Seq, e.AllocSeq) {
				assert.Equal(t, uint64(e.Op[0]-'a'), e.AllocSeq-base, "base %#x: the free of %s names seq %d", base, e.Op, e.AllocSeq)
			}
		}
		require.NoError(t, m.Close())
	}
}
