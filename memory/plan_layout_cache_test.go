package memory

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlanLayoutCacheKeysWholeInput: a cached layout is reused only for
// the same items, obstacles, segment size and page. The cache compared a
// hash of the items and obstacles alone, so a layout made for a larger
// segment came back for a smaller one, with offsets past its end (carve
// would then find no block there), and a hash collision would hand out
// another plan's offsets: two live blocks over the same bytes.
func TestPlanLayoutCacheKeysWholeInput(t *testing.T) {
	const page = 2 << 20
	items := []planItem{{size: 6 * page, from: 0, to: 4}, {size: 6 * page, from: 1, to: 3}}
	var sp stepPlanner
	big, _, _ := sp.layout(items, nil, 64*page, page, planForever)
	require.Equal(t, layoutPlan(items, nil, 64*page, page), big)
	small, _, _ := sp.layout(items, nil, 8*page, page, planForever)
	require.Equal(t, layoutPlan(items, nil, 8*page, page), small, "the layout of the smaller segment")
	for i, o := range small {
		require.True(t, o < 0 || o+items[i].size <= 8*page, "item %d at %d past the segment", i, o)
	}
	// The same items again: the cache serves them.
	n := sp.layouts
	again, _, _ := sp.layout(items, nil, 8*page, page, planForever)
	require.Equal(t, small, again)
	require.Equal(t, n, sp.layouts, "served from the cache")
	// A collision: the same key stored with other items is not reused.
	other := []planItem{{size: page, from: 0, to: 1}}
	sp.cache[0] = planCache{key: planKey(other, nil), items: items, limit: 8 * page, page: page, offs: []int64{5 * page}}
	got, _, _ := sp.layout(other, nil, 8*page, page, planForever)
	require.Equal(t, layoutPlan(other, nil, 8*page, page), got)
}
