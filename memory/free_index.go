package memory

import (
	"cmp"
	"math/bits"
	"slices"
)

// freeIndex is the set of a pool's free blocks of one kind (small or
// large), ordered by (stream, size, address) like one B-tree over them,
// but cut into size classes for speed: segregated fit (in the manner of
// TLSF) in front of exact best fit.
//
// Each stream has a classSet. Its classes partition the sizes in
// increasing order; a bitmap marks the classes that hold a block, and each
// class keeps its blocks in a small freeTree by (size, address). The best
// fit for n bytes is then the first key at or after (n, 0) in n's own
// class, else the smallest key of the next class the bitmap shows: exactly
// the block one tree over all of them would return, found among a few
// keys (usually one, kept without a tree) instead of in a tree of
// hundreds, after a couple of bit scans. Removing and inserting a block
// likewise touch only its class and at most one bit.
//
// Classes: a size of u units of MinBlockSize falls into class u while u <
// 2*classSub (one class per size up to 64 KiB); beyond, each power of two
// of units is cut into classSub equal classes, so a class spans at most
// 1/64th of its sizes. The index follows the pool's rounding: sizes are
// multiples of MinBlockSize. On BenchmarkPoolPair's mixed workload this
// made a pair 1.6x faster than one B-tree per pool (167 to 106 ns on a
// 2-core EPYC; 320 to 165 ns on the H200 host), where a tree of ~75 keys
// cost a few dependent node loads per operation; the lone-block classes,
// 64-byte blocks and 16-byte keys took it to 84 ns, and writing the
// lone-block operations out in the index's own methods to 83 (4% less).
// Keeping up to three blocks in the class slot before a tree took the
// mixed pair (on the harness of bench/results/cpu-pool-pair-2026-12-02-b.md)
// from about 90 to 84 ns; placing, finding and removing them (and the
// classes' bits) by conditional moves instead of branches, from 74 to
// about 68 ns on another host (cpu-pool-pair-2026-12-02-s13.md).
type freeIndex struct {
	// hot is the block inserted last, kept out of the classes until the
	// next insert (which moves it into its class) or until it is taken or
	// deleted; hotKey and hotStream are its key and stream, so that a take
	// tests it without loading it. See the comment on insert.
	hot       *Block
	hotKey    freeKey
	hotStream Stream
	// evicted counts the hot blocks moved into their class by the next
	// insert since one was last taken or deleted from the slot; after
	// hotMisses in a row, the next bypass inserts go straight to their
	// classes.
	evicted, bypass int
	// first is the first stream's classes, kept inline: most pools see
	// one stream, and finding its set then loads nothing. more holds the
	// other streams', in order of first use.
	first classSet
	more  []*classSet
	len   int
	nodes nodeSpare // shared by every class tree
}

const (
	classBits  = 6
	classSub   = 1 << classBits
	unitShift  = 9 // log2(MinBlockSize)
	maxUnitLog = 62 - unitShift
	// numClasses covers every size up to maxRequest rounded.
	numClasses = (maxUnitLog - classBits + 2) << classBits
	classWords = (numClasses + 63) / 64
)

// classSet is one stream's free blocks of an index. Most classes hold one
// to three blocks at a time, so those sit in ones, in key order, and a
// class's tree is used from its fourth block until a removal leaves three
// (then they move back): the common operations touch no tree node at all
// (a node load was a tenth of a pair's time), and a class of a few blocks
// is searched by a fixed sequence of compares instead of the tree's loops,
// whose exits depend on the key count (on the mixed pair, with one inline
// block and trees from the second, half the tree operations were on trees
// of one or two keys and the loops were ~2 of its 5.9 mispredictions).
// ones takes 24 bytes a class and the rarely used trees sit apart, so the
// classes a workload touches fit in fewer cache lines (with the lone block
// and the tree in one 32-byte entry, loading it was a fifth of the mixed
// pair's index time).
type classSet struct {
	used    bool // the set belongs to stream (first's is unused until then)
	stream  Stream
	summary uint64             // bit w set when words[w] is not zero
	words   [classWords]uint64 // bit c set when class c holds a block
	ones    []fewBlocks        // ones[c]: class c's blocks, when it has one or two
	// trees[c] is class c's tree, used from when it first holds two
	// blocks; held by value, one pointer fewer to follow (cachegrind: 8%
	// fewer first-level data misses on the mixed pair than []*freeTree).
	trees []freeTree
}

// fewBlocks is a class's blocks while it holds one to three, in key order
// (a below b below c; the unused places nil, from the end): its tree is
// empty then.
type fewBlocks struct{ a, b, c *Block }

// has reports whether class c holds a block.
func (cs *classSet) has(c int) bool { return cs.words[c>>6]&(1<<(c&63)) != 0 }

// ascendClass calls f on class c's blocks in key order until f returns
// false, and reports whether it went through all of them.
func (cs *classSet) ascendClass(c int, f func(*Block) bool) bool {
	if o := cs.ones[c]; o.a != nil {
		return f(o.a) && (o.b == nil || f(o.b)) && (o.c == nil || f(o.c))
	}
	return cs.trees[c].ascend(f)
}

// sizeClass returns the class of a block of size bytes (a positive
// multiple of MinBlockSize), without a branch: the test of u < classSub
// it had was mispredicted on more than one call in three on the mixed
// pair (bench/results/cpu-pool-pair-2026-12-02-b.md). With e the number
// of low bits of u a class ignores (0 below 2*classSub units, f-classBits
// for u in [2^f, 2^(f+1)) above), the class is e*classSub + u>>e, where
// u>>e lies in [classSub, 2*classSub) once e > 0.
func sizeClass(size int64) int {
	u := uint64(size) >> unitShift
	e := bits.Len64(u|classSub) - classBits - 1
	return e<<classBits + int(u>>e)
}

// Len returns the number of blocks in the index.
func (x *freeIndex) Len() int { return x.len }

// set returns stream s's class set, or nil.
func (x *freeIndex) set(s Stream) *classSet {
	if x.first.stream == s && x.first.used {
		return &x.first
	}
	for _, cs := range x.more {
		if cs.stream == s {
			return cs
		}
	}
	return nil
}

// newSet adds and returns a class set for stream s.
func (x *freeIndex) newSet(s Stream) *classSet {
	if !x.first.used {
		x.first = classSet{used: true, stream: s}
		return &x.first
	}
	cs := &classSet{used: true, stream: s}
	x.more = append(x.more, cs)
	return cs
}

// insert adds b, a block of stream s whose key must not be in the index.
//
// The block goes into the hot slot, and the block there before into its
// class. The slot is what makes a warm pair cheap: an allocation splits a
// free block and its rest is inserted, and the free of the allocation
// deletes that rest again to merge with it and inserts the merged block,
// which the next allocation takes. With the slot, none of these touch a
// class, a bitmap or a tree. The slot holds a block of the index like any
// other: take returns it only when it is the best fit (the classes are
// searched below its key), so the index's answers are unchanged.
//
// On a workload where the next insert comes before the hot block is used
// (BenchmarkPoolPair's mixed one: random frees and sizes), the slot only
// adds a move and tests whose outcome is random (on the mixed pair, 8%
// more time); so after hotMisses such evictions in a row the slot is
// emptied into its class and the next hotBypass inserts skip it (the mixed
// pair then costs some 3% more than without the slot, within the noise).
//
// Pool.split and Pool.insertFree write out the bypass case; keep them in
// step.
func (x *freeIndex) insert(s Stream, b *Block) {
	x.len++
	if x.bypass > 0 {
		x.bypass--
		x.insertClass(s, b)
		return
	}
	if h := x.hot; h != nil {
		x.insertClass(x.hotStream, h)
		if x.evicted++; x.evicted >= hotMisses {
			x.evicted, x.bypass, x.hot = 0, hotBypass, nil
			x.insertClass(s, b)
			return
		}
	}
	x.hot, x.hotKey, x.hotStream = b, keyOf(b), s
}

// The hot slot's bypass (see insert): after hotMisses hot blocks in a row
// were evicted unused, hotBypass inserts go straight to their classes.
const (
	hotMisses = 2
	hotBypass = 64
)

// delete removes b, a block of stream s found under its current key, and
// reports whether it was there. Pool.insertFree writes out the class
// case; keep it in step.
func (x *freeIndex) delete(s Stream, b *Block) bool {
	if x.hot == b {
		if x.hotStream != s || x.hotKey != keyOf(b) {
			return false
		}
		x.hot, x.evicted = nil, 0
		x.len--
		return true
	}
	if x.deleteClass(s, b) {
		x.len--
		return true
	}
	return false
}

// take removes and returns stream s's block with the smallest key in
// [lo, hi), or returns nil when there is none. Pool.alloc writes out the
// case without a hot block; keep it in step.
func (x *freeIndex) take(s Stream, lo, hi freeKey) *Block {
	if h := x.hot; h != nil && x.hotStream == s && !x.hotKey.less(lo) && x.hotKey.less(hi) {
		// The hot block fits: it is the answer unless a class holds a
		// smaller key (when there is a class block at all).
		if x.len > 1 {
			if b := x.takeClass(s, lo, x.hotKey); b != nil {
				x.len--
				return b
			}
		}
		x.hot, x.evicted = nil, 0
		x.len--
		return h
	}
	if b := x.takeClass(s, lo, hi); b != nil {
		x.len--
		return b
	}
	return nil
}

// insertClass adds b, a block of stream s, to its class.
func (x *freeIndex) insertClass(s Stream, b *Block) {
	// Every call here ends the function, so no value lives across one and
	// the common case below spills nothing to the stack.
	cs := x.set(s)
	c := sizeClass(b.size)
	if cs == nil || c >= len(cs.ones) {
		x.makeClass(s, c)
		x.insertClass(s, b)
		return
	}
	// Most inserts go to a class of zero to two blocks, where b takes its
	// place among them in key order. That case is written without a
	// branch on the class's count or on the keys (whether a class was
	// empty was mispredicted on one insert in three on the mixed pair):
	// an absent block stands in as blockMax, whose pointer is picked by
	// index before its key is loaded; b's place follows from the two
	// compares and the three places are filled by conditional moves.
	// Setting the class's bits again is harmless.
	o := &cs.ones[c]
	var aNil uint64
	if o.a == nil {
		aNil = 1
	}
	if cs.words[c>>6]>>(c&63)&aNil != 0 { // a class held in its tree
		cs.trees[c].insert(keyOf(b), b)
		return
	}
	if o.c != nil { // the three blocks and b make the tree
		x.makeTree(cs, c, b)
		return
	}
	cs.words[c>>6] |= 1 << (c & 63)
	cs.summary |= 1 << (c >> 6)
	a, m := o.a, o.b
	var ia, im int // 1 when present
	if a != nil {
		ia = 1
	}
	if m != nil {
		im = 1
	}
	// Indexing, not an if: the compiler keeps a branch for a pointer
	// that is loaded through.
	pa, pm := [2]*Block{&blockMax, a}[ia&1], [2]*Block{&blockMax, m}[im&1]
	k := keyOf(b)
	la, lm := keyOf(pa).below(k), keyOf(pm).below(k) // lm implies la
	na, nb, nc := b, a, m
	if la != 0 {
		na, nb = a, b
	}
	if lm != 0 {
		nb, nc = m, b
	}
	o.a, o.b, o.c = na, nb, nc
}

// makeClass makes stream s's class set if it has none and its class c.
func (x *freeIndex) makeClass(s Stream, c int) {
	cs := x.set(s)
	if cs == nil {
		cs = x.newSet(s)
	}
	if c >= len(cs.ones) {
		n := c + 1 - len(cs.ones)
		cs.ones = slices.Grow(cs.ones, n)[:c+1]
		cs.trees = slices.Grow(cs.trees, n)[:c+1]
	}
}

// makeTree moves class c's three inline blocks and b into its tree.
func (x *freeIndex) makeTree(cs *classSet, c int, b *Block) {
	o := &cs.ones[c]
	t := &cs.trees[c]
	if t.nodes == nil {
		t.nodes = &x.nodes
	}
	t.insertFour(o.a, o.b, o.c, b)
	*o = fewBlocks{}
}

// blockMax stands in for an absent block in insertClass's compares: its
// key is above every block's.
var blockMax = Block{size: 1<<63 - 1, addr: ^uintptr(0)}

// deleteClass removes b, a block of stream s, from its class and reports
// whether it was there.
func (x *freeIndex) deleteClass(s Stream, b *Block) bool {
	cs := x.set(s)
	if cs == nil {
		return false
	}
	c := sizeClass(b.size)
	if c >= len(cs.ones) || !cs.has(c) {
		return false
	}
	if o := &cs.ones[c]; o.a != nil {
		// Which of the three b is, by conditional moves: a switch on it
		// was mispredicted.
		var ia, iab, found int
		if b == o.a {
			ia = 1
		}
		if b == o.b {
			iab = 1
		}
		if b == o.c {
			found = 1
		}
		iab |= ia
		if found|iab == 0 {
			return false
		}
		na, nb := o.a, o.b
		if ia != 0 {
			na = o.b
		}
		if iab != 0 {
			nb = o.c
		}
		o.a, o.b, o.c = na, nb, nil
		cs.clearIfEmpty(c, na)
		return true
	}
	t := &cs.trees[c]
	if !t.delete(keyOf(b)) {
		return false
	}
	cs.shrunk(c, t)
	return true
}

// shrunk moves class c's tree t, after a removal, back to the class slot
// when it holds three blocks or fewer (one leaf), and clears the class's
// bit when it holds none.
func (cs *classSet) shrunk(c int, t *freeTree) {
	if t.len > 3 {
		return
	}
	if t.len == 0 {
		cs.clearBit(c)
		return
	}
	n := t.root // a tree of up to three keys is one leaf
	cs.ones[c] = fewBlocks{n.blocks[0], n.blocks[1], n.blocks[2]}
	n.blocks[0], n.blocks[1], n.blocks[2] = nil, nil, nil
	n.n, t.len = 0, 0
}

// takeClass removes and returns stream s's block with the smallest key
// in [lo, hi) from the classes, or returns nil when there is none.
func (x *freeIndex) takeClass(s Stream, lo, hi freeKey) *Block {
	cs := x.set(s)
	if cs == nil {
		return nil
	}
	c := sizeClass(lo.size)
	if c >= len(cs.ones) {
		return nil // no block of this size or larger
	}
	// The best fit is in lo's own class, or else it is the smallest key of
	// the next class that holds any (every key there is above lo) if that
	// is below hi. The few-block case, most takes, is written out: as a
	// call it cost a tenth of a pair.
	if cs.has(c) {
		if o := &cs.ones[c]; o.a != nil {
			if k := keyOf(o.a); !k.less(lo) {
				if k.less(hi) {
					b := o.a
					o.a, o.b, o.c = o.b, o.c, nil
					cs.clearIfEmpty(c, o.a)
					return b
				}
			} else if b := o.b; b != nil {
				if k := keyOf(b); !k.less(lo) {
					if k.less(hi) {
						o.b, o.c = o.c, nil
						return b
					}
				} else if b := o.c; b != nil {
					if k := keyOf(b); !k.less(lo) && k.less(hi) {
						o.c = nil
						return b
					}
				}
			}
		} else if t := &cs.trees[c]; true {
			if b := t.take(lo, hi); b != nil {
				cs.shrunk(c, t)
				return b
			}
		}
	}
	if c = cs.next(c + 1); c < 0 {
		return nil
	}
	if o := &cs.ones[c]; o.a != nil {
		b := o.a
		if !keyOf(b).less(hi) {
			return nil
		}
		o.a, o.b, o.c = o.b, o.c, nil
		cs.clearIfEmpty(c, o.a)
		return b
	}
	t := &cs.trees[c]
	b := t.takeMin(hi) // every key of a later class is above lo
	if b != nil {
		cs.shrunk(c, t)
	}
	return b
}

// clearBit marks class c empty, when a removal left it so. A class keeps
// its tree's (empty) root node for the next time it holds two blocks:
// handing it back and taking it again cost 10% of a pair, and the nodes
// are bounded by the classes that ever held two blocks at once, a few
// hundred bytes each.
func (cs *classSet) clearBit(c int) {
	w := c >> 6
	cs.words[w] &^= 1 << (c & 63)
	var z uint64 // the word's summary bit goes with its last class
	if cs.words[w] == 0 {
		z = 1
	}
	cs.summary &^= z << w
}

// clearIfEmpty is clearBit when first, class c's first block after a
// removal, is nil, without a branch on it (random on the mixed pair).
func (cs *classSet) clearIfEmpty(c int, first *Block) {
	var e uint64
	if first == nil {
		e = 1
	}
	w := c >> 6
	cs.words[w] &^= e << (c & 63)
	var z uint64
	if cs.words[w] == 0 {
		z = 1
	}
	cs.summary &^= z << w
}

// next returns the first class at or after c that holds a block, or -1.
func (cs *classSet) next(c int) int {
	w := c >> 6
	if w >= classWords {
		return -1
	}
	if m := cs.words[w] >> (c & 63); m != 0 {
		return c + bits.TrailingZeros64(m)
	}
	rest := cs.summary >> (w + 1) // 0 when w is the last word
	if rest == 0 {
		return -1
	}
	w += 1 + bits.TrailingZeros64(rest)
	return w<<6 + bits.TrailingZeros64(cs.words[w])
}

// ascend calls f on every block in key order until f returns false. The
// hot block moves into its class first.
func (x *freeIndex) ascend(f func(*Block) bool) {
	if h := x.hot; h != nil {
		x.insertClass(x.hotStream, h)
		x.hot = nil
	}
	var sets []*classSet
	if x.first.used {
		sets = append(sets, &x.first)
	}
	sets = append(sets, x.more...)
	slices.SortFunc(sets, func(a, b *classSet) int { return cmp.Compare(a.stream, b.stream) })
	for _, cs := range sets {
		for c := cs.next(0); c >= 0; c = cs.next(c + 1) {
			if !cs.ascendClass(c, f) {
				return
			}
		}
	}
}

// ascendFrom calls f on stream s's blocks with keys at or after lo, in
// key order, until f returns false. The hot block moves into its class
// first.
func (x *freeIndex) ascendFrom(s Stream, lo freeKey, f func(*Block) bool) {
	if h := x.hot; h != nil {
		x.insertClass(x.hotStream, h)
		x.hot = nil
	}
	cs := x.set(s)
	if cs == nil {
		return
	}
	c := sizeClass(lo.size)
	if c >= len(cs.ones) {
		return
	}
	for c = cs.next(c); c >= 0; c = cs.next(c + 1) {
		if !cs.ascendClass(c, func(b *Block) bool { return keyOf(b).less(lo) || f(b) }) {
			return
		}
	}
}

// clear empties the index and drops its nodes.
func (x *freeIndex) clear() { *x = freeIndex{} }
