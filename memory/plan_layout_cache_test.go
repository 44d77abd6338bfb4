package memory

import (
	"slices"
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

// TestPlanPageNeedsCached: the pages' last items of a layout (a plan's
// need) are the last item on each page, computed once for a layout of
// the cache and then handed out again.
func TestPlanPageNeedsCached(t *testing.T) {
	const page = 2 << 20
	var items []planItem
	for i := range int64(40) {
		items = append(items, planItem{size: (1 + i%7) * page / 3, from: i, to: i + 1 + i%5})
	}
	var sp stepPlanner
	offs, _, _ := sp.layout(items, nil, 256*page, page, planForever)
	need := sp.pageNeeds(items, offs, page)
	for pg := range int64(len(need)) {
		want := int32(-1)
		for j, it := range items {
			if o := offs[j]; o >= 0 && o/page <= pg && pg <= (o+it.size-1)/page {
				want = int32(max(int64(want), it.from))
			}
		}
		require.Equal(t, want, need[pg], "page %d", pg)
	}
	again := sp.pageNeeds(items, offs, page)
	require.Same(t, &need[0], &again[0], "kept with the layout")
	fresh := sp.pageNeeds(items, slices.Clone(offs), page)
	require.Equal(t, need, fresh)
	require.NotSame(t, &need[0], &fresh[0], "offsets not of the cache: computed")
}
