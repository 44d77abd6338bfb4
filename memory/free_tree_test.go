package memory

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// testSegs are segments of streams 0 to 3, for test blocks.
var testSegs = [4]*segment{{stream: 0}, {stream: 1}, {stream: 2}, {stream: 3}}

// keyCmp orders test blocks by their tree keys, (size, address).
func keyCmp(a, b *Block) int {
	if keyOf(a).less(keyOf(b)) {
		return -1
	}
	if keyOf(b).less(keyOf(a)) {
		return 1
	}
	return 0
}

// streamKey orders test blocks as one set over all streams: by (stream,
// size, address), as the free index must.
func streamKey(a, b *Block) int {
	if c := cmp.Compare(a.seg.stream, b.seg.stream); c != 0 {
		return c
	}
	return keyCmp(a, b)
}

// tkey is a test block's key.
func tkey(b *Block) freeKey { return keyOf(b) }

// checkFreeTree verifies the B-tree invariants of t (key order, node
// fill, equal leaf depth, keys matching their blocks) and that it holds
// exactly want, in order.
func checkFreeTree(t *testing.T, tr *freeTree, want []*Block) {
	t.Helper()
	var got []*Block
	tr.ascend(func(b *Block) bool { got = append(got, b); return true })
	require.Len(t, got, len(want))
	for i := range want {
		require.Same(t, want[i], got[i], "block %d", i)
	}
	require.Equal(t, len(want), tr.Len())
	if tr.root == nil {
		return
	}
	leafDepth := -1
	var walk func(n *freeNode, depth int, lo, hi *freeKey)
	walk = func(n *freeNode, depth int, lo, hi *freeKey) {
		if n != tr.root {
			require.GreaterOrEqual(t, n.n, freeTreeMin, "node under-full")
		}
		require.LessOrEqual(t, n.n, freeTreeMax)
		for i := range n.n {
			require.Equal(t, tkey(n.blocks[i]), n.keys[i], "key does not match its block")
			if i > 0 {
				require.True(t, n.keys[i-1].less(n.keys[i]), "keys out of order")
			}
		}
		for i := n.n; i < freeTreeMax; i++ {
			require.Nil(t, n.blocks[i], "stale block pointer past the end of a node")
		}
		if n.n > 0 {
			if lo != nil {
				require.True(t, lo.less(n.keys[0]))
			}
			if hi != nil {
				require.True(t, n.keys[n.n-1].less(*hi))
			}
		}
		if n.kids == nil {
			if leafDepth < 0 {
				leafDepth = depth
			}
			require.Equal(t, leafDepth, depth, "leaves at different depths")
			return
		}
		for i := 0; i <= n.n; i++ {
			l, h := lo, hi
			if i > 0 {
				l = &n.keys[i-1]
			}
			if i < n.n {
				h = &n.keys[i]
			}
			walk(n.kids[i], depth+1, l, h)
		}
		for i := n.n + 1; i <= freeTreeMax; i++ {
			require.Nil(t, n.kids[i], "stale child pointer past the end of a node")
		}
	}
	walk(tr.root, 0, nil, nil)
}

// TestFreeTreeRandom drives the free tree with random inserts, deletes and
// best-fit takes and checks it against a sorted slice.
func TestFreeTreeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	less := keyCmp
	for _, n := range []int{10, 200, 3000} {
		var tr freeTree
		var model []*Block
		nextAddr := uintptr(0x1000)
		for step := range 6 * n {
			grow := len(model) < n/2 || rng.IntN(2) == 0
			switch {
			case grow && len(model) < n:
				b := &Block{seg: testSegs[rng.IntN(3)], size: int64(1+rng.IntN(20)) * MinBlockSize, addr: nextAddr}
				nextAddr += 0x200
				tr.insert(tkey(b), b)
				i, _ := slices.BinarySearchFunc(model, b, less)
				model = slices.Insert(model, i, b)
			case len(model) > 0:
				i := rng.IntN(len(model))
				require.True(t, tr.delete(tkey(model[i])))
				require.False(t, tr.delete(tkey(model[i])), "deleted twice")
				absent := freeKey{size: int64(1+rng.IntN(21)) * MinBlockSize, addr: nextAddr + 1}
				require.False(t, tr.delete(absent), "a key never inserted") // leaves the tree as it was (checked below)
				model = slices.Delete(model, i, i+1)
			}
			k := freeKey{size: int64(1+rng.IntN(21)) * MinBlockSize}
			i, _ := slices.BinarySearchFunc(model, &Block{seg: testSegs[0], size: k.size}, less)
			var want *Block
			if i < len(model) {
				want = model[i]
			}
			hi := freeKey{size: int64(1+rng.IntN(22)) * MinBlockSize}
			if want != nil && !tkey(want).less(hi) {
				want = nil
			}
			require.Same(t, want, tr.take(k, hi), "best fit for %+v below %+v", k, hi)
			if want != nil {
				model = slices.Delete(model, i, i+1)
			}
			// takeMin: the smallest key, when it is below hi.
			if rng.IntN(4) == 0 {
				var min *Block
				if len(model) > 0 && tkey(model[0]).less(hi) {
					min = model[0]
				}
				require.Same(t, min, tr.takeMin(hi), "smallest key below %+v", hi)
				if min != nil {
					model = model[1:]
				}
			}
			if step%97 == 0 || n <= 10 {
				checkFreeTree(t, &tr, model)
			}
		}
		for len(model) > 0 {
			i := rng.IntN(len(model))
			require.True(t, tr.delete(tkey(model[i])))
			model = slices.Delete(model, i, i+1)
		}
		checkFreeTree(t, &tr, nil)
		require.Nil(t, tr.take(freeKey{}, freeKey{size: 1 << 62}))
	}
}
