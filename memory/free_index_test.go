package memory

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSizeClass(t *testing.T) {
	// A class per size (of 512 B units) up to 64 KiB, then 64 classes per
	// power of two.
	assert.Equal(t, 1, sizeClass(512))
	assert.Equal(t, 63, sizeClass(63*512))
	assert.Equal(t, 64, sizeClass(64*512))
	assert.Equal(t, 65, sizeClass(65*512))
	assert.Equal(t, 127, sizeClass(127*512))
	assert.Equal(t, 128, sizeClass(128*512), "from 64 KiB a class spans 1 KiB")
	assert.Equal(t, 191, sizeClass(255*512))
	assert.Equal(t, 192, sizeClass(256*512), "from 128 KiB, 2 KiB")
	assert.Equal(t, 128, sizeClass(129*512))
	assert.Equal(t, 129, sizeClass(130*512))
	// Monotonic and without gaps across the boundaries, up to the largest
	// request.
	prev := sizeClass(MinBlockSize)
	for u := int64(2); u < 1<<14; u++ {
		c := sizeClass(u * MinBlockSize)
		require.True(t, c == prev || c == prev+1, "size %d: class %d after %d", u*MinBlockSize, c, prev)
		prev = c
	}
	for shift := 14; shift <= maxUnitLog; shift++ {
		below, at := sizeClass((int64(1)<<shift-1)*MinBlockSize), sizeClass(int64(1)<<shift*MinBlockSize)
		require.Equal(t, below+1, at, "2^%d units", shift)
	}
	top := sizeClass(RoundSize(maxRequest))
	assert.Less(t, top, numClasses, "the largest request has a class")
	assert.LessOrEqual(t, numClasses, 64*classWords)
	assert.LessOrEqual(t, classWords, 64, "one summary word covers every bitmap word")
}

// TestFreeIndexRandom drives the index with random inserts, deletes and
// best-fit takes over several streams and sizes across exact and ranged
// classes, and checks every answer against a sorted slice: the index must
// return exactly what one tree ordered by (stream, size, address) would.
func TestFreeIndexRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	cmp := streamKey
	// Sizes cluster so that classes hold many blocks (including more than
	// a tree node holds) as well as few.
	randSize := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return int64(1+rng.IntN(8)) * MinBlockSize // exact classes
		case 1:
			return (64<<10 + int64(rng.IntN(4))*MinBlockSize) // one ranged class
		default:
			return int64(1+rng.IntN(1<<16)) * MinBlockSize // up to 32 MiB
		}
	}
	for _, n := range []int{10, 300, 3000} {
		var x freeIndex
		var model []*Block
		nextAddr := uintptr(0x1000)
		for step := range 6 * n {
			grow := len(model) < n/2 || rng.IntN(2) == 0
			switch {
			case grow && len(model) < n:
				b := &Block{seg: testSegs[rng.IntN(3)], size: randSize(), addr: nextAddr}
				nextAddr += 0x200
				x.insert(b.seg.stream, b)
				i, _ := slices.BinarySearchFunc(model, b, cmp)
				model = slices.Insert(model, i, b)
			case len(model) > 0:
				i := rng.IntN(len(model))
				require.True(t, x.delete(model[i].seg.stream, model[i]))
				require.False(t, x.delete(model[i].seg.stream, model[i]), "deleted twice")
				model = slices.Delete(model, i, i+1)
			}
			s := Stream(rng.IntN(4)) // stream 3 never has blocks
			lo := freeKey{size: randSize()}
			hi := freeKey{size: lo.size + int64(rng.IntN(1<<16))*MinBlockSize}
			if rng.IntN(3) == 0 {
				hi.size = 1 << 62
			}
			i, _ := slices.BinarySearchFunc(model, &Block{seg: testSegs[s], size: lo.size}, cmp)
			var want *Block
			if i < len(model) && model[i].seg.stream == s && tkey(model[i]).less(hi) {
				want = model[i]
			}
			require.Same(t, want, x.take(s, lo, hi), "best fit on stream %d for %+v below %+v", s, lo, hi)
			if want != nil {
				model = slices.Delete(model, i, i+1)
			}
			if step%97 == 0 || n <= 10 {
				checkFreeIndex(t, &x, model)
			}
		}
		for len(model) > 0 {
			i := rng.IntN(len(model))
			require.True(t, x.delete(model[i].seg.stream, model[i]))
			model = slices.Delete(model, i, i+1)
		}
		checkFreeIndex(t, &x, nil)
		require.Nil(t, x.take(0, freeKey{size: 512}, freeKey{size: 1 << 62}))
	}
}

// checkFreeIndex verifies that x holds exactly want, in key order, that
// every class tree is a valid B-tree of its class's blocks, and that the
// bitmaps mark exactly the classes that hold blocks.
func checkFreeIndex(t *testing.T, x *freeIndex, want []*Block) {
	t.Helper()
	var got []*Block
	x.ascend(func(b *Block) bool { got = append(got, b); return true })
	require.Equal(t, len(want), len(got))
	for i := range want {
		require.Same(t, want[i], got[i], "block %d", i)
	}
	require.Equal(t, len(want), x.Len())
	sets := x.more
	if x.first.used {
		sets = append([]*classSet{&x.first}, sets...)
	}
	for _, cs := range sets {
		require.Equal(t, len(cs.ones), len(cs.trees))
		for c := range cs.ones {
			var blocks []*Block
			cs.ascendClass(c, func(b *Block) bool { blocks = append(blocks, b); return true })
			for _, b := range blocks {
				require.Equal(t, c, sizeClass(b.size))
				require.Equal(t, cs.stream, b.seg.stream)
			}
			if o := cs.ones[c]; o.a != nil {
				require.True(t, cs.trees[c].len == 0, "class %d: blocks in the slot and a tree", c)
				want := []*Block{o.a}
				if o.b != nil {
					want = append(want, o.b)
				}
				if o.c != nil {
					want = append(want, o.c)
				}
				require.Equal(t, want, blocks)
			} else if tr := &cs.trees[c]; tr.root != nil {
				require.True(t, o.b == nil && o.c == nil, "class %d: later blocks alone", c)
				require.True(t, tr.len == 0 || tr.len > 3, "class %d: a tree of %d blocks", c, tr.len)
				checkFreeTree(t, tr, blocks)
			}
			require.Equal(t, len(blocks) > 0, cs.has(c), "class %d bit", c)
		}
		for w := range classWords {
			require.Equal(t, cs.words[w] != 0, cs.summary&(1<<w) != 0, "summary bit %d", w)
		}
	}
}

// TestFreeIndexKeepsNodesBounded checks that a class that empties and
// fills again reuses its node, and that take on an index of one block
// does not allocate.
func TestFreeIndexKeepsNodesBounded(t *testing.T) {
	var x freeIndex
	a := &Block{size: 2 << 20, addr: 0x10000}
	b := &Block{size: 2<<20 - 4096, addr: 0x20000}
	x.insert(0, a)
	allocs := testing.AllocsPerRun(100, func() {
		got := x.take(0, freeKey{size: 4096}, freeKey{size: 1 << 62})
		if got != a {
			panic("wrong block")
		}
		x.insert(0, b)
		if !x.delete(0, b) {
			panic("b missing")
		}
		x.insert(0, a)
	})
	assert.Zero(t, allocs)
}
