package memory

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPoisonFreed: with EnvPoison on, a freed block of a host pool reads
// 0xFF through a slice taken while it was live, in classic and expandable
// pools, and a block handed out again is not touched by the poison of
// another; a pool over any other backend is never poisoned.
func TestPoisonFreed(t *testing.T) {
	defer func(old bool) { poisonFreed = old }(poisonFreed)
	poisonFreed = true
	for _, seg := range []SegmentMode{SegmentsClassic, SegmentsExpandable} {
		m := NewHostManager(Config{Segments: seg})
		a, err := m.Alloc(3<<20+5, RoleActivation)
		require.NoError(t, err)
		b, err := m.Alloc(1000, RoleActivation)
		require.NoError(t, err)
		ha, hb := a.Host(), b.Host()
		for i := range ha {
			ha[i] = byte(i)
		}
		copy(hb, bytes.Repeat([]byte{7}, len(hb)))
		require.NoError(t, m.Free(a))
		require.Equal(t, bytes.Repeat([]byte{0xFF}, len(ha)), ha, "segments %v", seg)
		require.Equal(t, bytes.Repeat([]byte{7}, len(hb)), hb, "a live neighbour")
		require.NoError(t, m.Free(b))
		require.NoError(t, m.Close())
	}
	require.True(t, hostOnly(NewHostBackend(TierHost)))
	require.False(t, hostOnly(struct{ Backend }{NewHostBackend(TierHost)}), "a backend of another kind")
}
