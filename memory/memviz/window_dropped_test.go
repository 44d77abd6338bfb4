package memviz_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memviz"
)

// TestWindowDropped: a window kept the whole history's Dropped, so a
// window between two marks of a history whose ring had wrapped claimed
// to have lost events although it holds every one of them. Dropped is
// the history's for a window from its start (the events lost came
// before its first kept event), 0 for one from a later event.
func TestWindowDropped(t *testing.T) {
	dev := memory.TierDevice
	h := &memory.History{Dropped: 5, Capacity: 5, Events: []memory.Event{
		{Seq: 5, Time: 10, Kind: memory.EventAlloc, Tier: dev, Role: memory.RoleActivation, Size: 100, Block: 512},
		{Seq: 6, Time: 20, Kind: memory.EventMark, Op: "s1"},
		{Seq: 7, Time: 30, Kind: memory.EventFree, Tier: dev, Role: memory.RoleActivation, Size: 100, Block: 512, AllocSeq: 5},
		{Seq: 8, Time: 40, Kind: memory.EventMark, Op: "s2"},
		{Seq: 9, Time: 50, Kind: memory.EventAlloc, Tier: dev, Role: memory.RoleActivation, Size: 100, Block: 512},
	}}
	for _, tc := range []struct {
		name     string
		from, to string
		dropped  uint64
	}{
		{"between marks", "s1", "s2", 0},
		{"from a mark to the end", "s1", "", 0},
		{"from the start", "", "s2", 5},
		{"all", "", "", 5},
	} {
		w, err := memviz.Window(h, tc.from, tc.to)
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.dropped, w.Dropped, tc.name)
	}
	for _, tc := range []struct {
		from, to int64
		dropped  uint64
	}{
		{25, 0, 0},
		{11, 45, 0},
		{0, 35, 5},
		{10, 0, 5},
	} {
		assert.Equal(t, tc.dropped, memviz.WindowTime(h, tc.from, tc.to).Dropped, "WindowTime(%d, %d)", tc.from, tc.to)
	}
	assert.Equal(t, uint64(5), h.Dropped, "h is left as it was")
}
