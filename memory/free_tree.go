package memory

import "math/bits"

// freeTree is an ordered set of free blocks of one stream: a B-tree keyed
// by (size, address), specialised for the pool's hot path; a freeIndex
// keeps one per stream and size class. It is what github.com/google/btree would give, with
// two differences that halve the cost of a lookup: the keys
// sit in the nodes themselves, so a search reads a node's keys from a few
// contiguous cache lines instead of following a pointer to each Block, and
// the comparison is inlined instead of called through a function value.
//
// It is a classic B-tree (CLRS, chapter 18): every node but the root holds
// between freeTreeMin and freeTreeMax keys, an inner node one child more
// than keys, all leaves sit at the same depth. Insertion splits full nodes
// on the way down, so it never backs up; deletion tops up (by borrowing
// from a sibling, or merging with one) every child it descends into that
// has only freeTreeMin keys, so removing from it never underflows, and a
// key found in an inner node is replaced by its predecessor. Keys are
// unique: two free blocks never share an address.
type freeTree struct {
	root *freeNode
	len  int
	// nodes holds the nodes emptied by merges and root collapses for the
	// next splits, so a warm tree allocates nothing. A freeIndex's class
	// trees share one; a tree without one allocates and drops its nodes.
	nodes *nodeSpare
}

// nodeSpare is a free list of tree nodes; there are never more in it than
// its trees once held at a time.
type nodeSpare struct{ free []*freeNode }

func (s *nodeSpare) get() *freeNode {
	k := len(s.free)
	if k == 0 {
		return nil
	}
	n := s.free[k-1]
	s.free[k-1] = nil
	s.free = s.free[:k-1]
	return n
}

const (
	// freeTreeDegree is the B-tree's minimum degree t: nodes hold t-1 to
	// 2t-1 keys. On BenchmarkPoolPair's mixed workload 3 to 32 were within
	// a few percent, with one tree per pool and with one per class.
	freeTreeDegree = 8
	freeTreeMin    = freeTreeDegree - 1
	freeTreeMax    = 2*freeTreeDegree - 1
)

// freeKey orders the free blocks of a stream: the first key at or after
// (n, 0) is the best fit for n bytes, the lowest-addressed among equals.
type freeKey struct {
	size int64
	addr uintptr
}

func (a freeKey) less(b freeKey) bool { return a.below(b) != 0 }

// below is 1 when a orders before b, else 0: the borrow of the 128-bit
// subtraction a - b, which compiles to two instructions and no branch
// (sizes are positive, so their unsigned order is their order).
func (a freeKey) below(b freeKey) uint64 {
	_, c := bits.Sub64(uint64(a.addr), uint64(b.addr), 0)
	_, c = bits.Sub64(uint64(a.size), uint64(b.size), c)
	return c
}

// keyOf is b's key.
func keyOf(b *Block) freeKey { return freeKey{b.size, b.addr} }

// freeNode is a node of a freeTree; kids is nil in leaves.
type freeNode struct {
	n      int
	keys   [freeTreeMax]freeKey
	blocks [freeTreeMax]*Block
	kids   *[freeTreeMax + 1]*freeNode
}

// search returns the index of the first key of n at or after k, and
// whether it equals k.
func (n *freeNode) search(k freeKey) (int, bool) {
	// A branch-free count of the keys before k: a node's keys span a few
	// cache lines, and a binary search's branches on random keys
	// mispredict at every step.
	var lo uint64
	for i := range n.keys[:n.n] {
		lo += n.keys[i].below(k)
	}
	return int(lo), int(lo) < n.n && n.keys[lo] == k
}

// closeAt shifts the leaf entries after i one place down over i; the last
// place keeps a stale copy for the caller to clear. A loop instead of
// copy: nodes of the pool's class trees hold a few keys, where the
// runtime's typed copy of the block pointers cost more than the moves
// themselves. (Insertion into a leaf and removal of a given key shift
// as they search: freeTree.insert, removeLeaf.)
func (n *freeNode) closeAt(i int) {
	for j := i; j < n.n-1; j++ {
		n.keys[j], n.blocks[j] = n.keys[j+1], n.blocks[j+1]
	}
}

// Len returns the number of blocks in the tree.
func (t *freeTree) Len() int { return t.len }

// take removes and returns the block with the smallest key in [lo, hi),
// or returns nil when there is none. It is a best-fit lookup and its
// removal in one descent: the smallest key at or after lo is either in the
// leaf the search for lo ends in or the separator above the last left
// turn; in the second case that leaf's last key, the separator's
// predecessor, takes its place. Children are topped up on the way down as
// for delete, which leaves the tree valid whether or not a block is taken.
func (t *freeTree) take(lo, hi freeKey) *Block {
	n := t.root
	if n == nil {
		return nil
	}
	var sep *freeNode // the separator above the last left turn: n.keys[si]
	var si int
	for {
		i, eq := n.search(lo)
		if n.kids == nil {
			var b *Block
			switch {
			case i < n.n:
				if !n.keys[i].less(hi) {
					return nil
				}
				b = n.blocks[i]
				n.closeAt(i)
			case sep != nil:
				if !sep.keys[si].less(hi) {
					return nil
				}
				b = sep.blocks[si]
				sep.keys[si], sep.blocks[si] = n.keys[n.n-1], n.blocks[n.n-1]
			default:
				return nil
			}
			n.n--
			n.blocks[n.n] = nil
			t.len--
			return b
		}
		if n.kids[i].n <= freeTreeMin {
			n = t.growChild(n, i) // keys moved: search again
			continue
		}
		if eq {
			if !n.keys[i].less(hi) {
				return nil
			}
			b := n.blocks[i]
			n.keys[i], n.blocks[i] = t.takeMax(n.kids[i])
			t.len--
			return b
		}
		if i < n.n {
			sep, si = n, i
		}
		n = n.kids[i]
	}
}

// takeMin removes and returns the block with the smallest key if that key
// is below hi, else returns nil: take for a lo below every key, without
// comparing lo with each key on the way. The smallest key is the first of
// the leftmost leaf; children are topped up on the way down as in take.
func (t *freeTree) takeMin(hi freeKey) *Block {
	n := t.root
	if n == nil {
		return nil
	}
	for n.kids != nil {
		if n.kids[0].n <= freeTreeMin {
			n = t.growChild(n, 0)
			continue
		}
		n = n.kids[0]
	}
	if n.n == 0 || !n.keys[0].less(hi) {
		return nil
	}
	b := n.blocks[0]
	n.closeAt(0)
	n.n--
	n.blocks[n.n] = nil
	t.len--
	return b
}

// insert adds b under key k, which must not be in the tree.
func (t *freeTree) insert(k freeKey, b *Block) {
	if t.root == nil {
		t.root = t.newNode(false)
	}
	if t.root.n == freeTreeMax {
		old := t.root
		t.root = t.newNode(true)
		t.root.kids[0] = old
		t.splitChild(t.root, 0)
	}
	n := t.root
	for {
		if n.kids == nil {
			// The keys above k move up one place, from the last: one
			// loop, whose exit is k's place, where a search and then a
			// shift were two, each exit mispredicted on random keys.
			j := n.n
			for j > 0 && k.less(n.keys[j-1]) {
				n.keys[j], n.blocks[j] = n.keys[j-1], n.blocks[j-1]
				j--
			}
			if j > 0 && n.keys[j-1] == k {
				panic("memory: free tree: block inserted twice")
			}
			n.keys[j], n.blocks[j] = k, b
			n.n++
			t.len++
			return
		}
		i, eq := n.search(k)
		if eq {
			panic("memory: free tree: block inserted twice")
		}
		if n.kids[i].n == freeTreeMax {
			t.splitChild(n, i)
			if n.keys[i].less(k) {
				i++
			}
		}
		n = n.kids[i]
	}
}

// insertFour fills an empty tree with four blocks under distinct keys,
// a's below b's below c's: one leaf written in order.
func (t *freeTree) insertFour(a, b, c, d *Block) {
	if t.root == nil {
		t.root = t.newNode(false)
	}
	n := t.root
	ka, kb, kc, kd := keyOf(a), keyOf(b), keyOf(c), keyOf(d)
	if t.len != 0 || n.kids != nil { // not empty (an empty tree is a leaf)
		t.insert(ka, a)
		t.insert(kb, b)
		t.insert(kc, c)
		t.insert(kd, d)
		return
	}
	switch {
	case kd.less(ka):
		ka, a, kb, b, kc, c, kd, d = kd, d, ka, a, kb, b, kc, c
	case kd.less(kb):
		kb, b, kc, c, kd, d = kd, d, kb, b, kc, c
	case kd.less(kc):
		kc, c, kd, d = kd, d, kc, c
	}
	n.keys[0], n.blocks[0] = ka, a
	n.keys[1], n.blocks[1] = kb, b
	n.keys[2], n.blocks[2] = kc, c
	n.keys[3], n.blocks[3] = kd, d
	n.n, t.len = 4, 4
}

// splitChild splits the full child i of n around its middle key, which
// moves up into n (not full).
func (t *freeTree) splitChild(n *freeNode, i int) {
	c := n.kids[i]
	r := t.newNode(c.kids != nil)
	const mid = freeTreeDegree - 1
	r.n = freeTreeMax - mid - 1
	copy(r.keys[:r.n], c.keys[mid+1:])
	copy(r.blocks[:r.n], c.blocks[mid+1:])
	clear(c.blocks[mid+1:])
	if c.kids != nil {
		copy(r.kids[:r.n+1], c.kids[mid+1:])
		clear(c.kids[mid+1:])
	}
	copy(n.keys[i+1:n.n+1], n.keys[i:n.n])
	copy(n.blocks[i+1:n.n+1], n.blocks[i:n.n])
	copy(n.kids[i+2:n.n+2], n.kids[i+1:n.n+1])
	n.keys[i], n.blocks[i] = c.keys[mid], c.blocks[mid]
	c.blocks[mid] = nil
	n.kids[i+1] = r
	n.n++
	c.n = mid
}

// delete removes the block under key k and reports whether it was there.
func (t *freeTree) delete(k freeKey) bool {
	if t.root == nil {
		return false
	}
	ok := t.remove(t.root, k)
	if ok {
		t.len--
	}
	return ok
}

// remove deletes k from the subtree of n and reports whether it was
// there.
func (t *freeTree) remove(n *freeNode, k freeKey) bool {
	for {
		if n.kids == nil {
			return n.removeLeaf(k)
		}
		i, eq := n.search(k)
		if n.kids[i].n <= freeTreeMin {
			n = t.growChild(n, i) // k may have moved: search again
			continue
		}
		if eq {
			// k is in this inner node: its predecessor, the largest key
			// of the left child, takes its place.
			n.keys[i], n.blocks[i] = t.takeMax(n.kids[i])
			return true
		}
		n = n.kids[i]
	}
}

// removeLeaf deletes k from leaf n and reports whether it was there. The
// keys above k move down one place, from the last, until k is reached:
// one loop, whose exit is k's place, where a search and then a shift were
// two, each exit mispredicted on random keys. A key that is not there
// (never on the pool's path) has them moved back.
func (n *freeNode) removeLeaf(k freeKey) bool {
	j := n.n - 1
	if j < 0 {
		return false
	}
	ck, cb := n.keys[j], n.blocks[j] // the key carried down, not yet placed
	for j > 0 && k.less(ck) {
		pk, pb := n.keys[j-1], n.blocks[j-1]
		n.keys[j-1], n.blocks[j-1] = ck, cb
		ck, cb = pk, pb
		j--
	}
	if ck != k {
		for m := n.n - 2; m > j; m-- {
			n.keys[m], n.blocks[m] = n.keys[m-1], n.blocks[m-1]
		}
		n.keys[j], n.blocks[j] = ck, cb
		return false
	}
	n.n--
	n.blocks[n.n] = nil
	return true
}

// takeMax removes and returns the largest key of n's subtree, n having
// more than freeTreeMin keys.
func (t *freeTree) takeMax(n *freeNode) (freeKey, *Block) {
	for n.kids != nil {
		i := n.n
		if n.kids[i].n <= freeTreeMin {
			n = t.growChild(n, i)
			continue
		}
		n = n.kids[i]
	}
	n.n--
	k, b := n.keys[n.n], n.blocks[n.n]
	n.blocks[n.n] = nil
	return k, b
}

// growChild gives child i of n more than freeTreeMin keys, by borrowing
// one through n from a sibling that can spare it or else by merging the
// child with a sibling and the key between them, and returns the node to
// redo the search in: n, or after the root collapsed into the merged
// child, that child.
func (t *freeTree) growChild(n *freeNode, i int) *freeNode {
	if i > 0 && n.kids[i-1].n > freeTreeMin {
		c, l := n.kids[i], n.kids[i-1]
		copy(c.keys[1:c.n+1], c.keys[:c.n])
		copy(c.blocks[1:c.n+1], c.blocks[:c.n])
		c.keys[0], c.blocks[0] = n.keys[i-1], n.blocks[i-1]
		if c.kids != nil {
			copy(c.kids[1:c.n+2], c.kids[:c.n+1])
			c.kids[0] = l.kids[l.n]
			l.kids[l.n] = nil
		}
		c.n++
		l.n--
		n.keys[i-1], n.blocks[i-1] = l.keys[l.n], l.blocks[l.n]
		l.blocks[l.n] = nil
		return n
	}
	if i < n.n && n.kids[i+1].n > freeTreeMin {
		c, r := n.kids[i], n.kids[i+1]
		c.keys[c.n], c.blocks[c.n] = n.keys[i], n.blocks[i]
		if c.kids != nil {
			c.kids[c.n+1] = r.kids[0]
			copy(r.kids[:r.n], r.kids[1:r.n+1])
			r.kids[r.n] = nil
		}
		c.n++
		n.keys[i], n.blocks[i] = r.keys[0], r.blocks[0]
		copy(r.keys[:r.n-1], r.keys[1:r.n])
		copy(r.blocks[:r.n-1], r.blocks[1:r.n])
		r.n--
		r.blocks[r.n] = nil
		return n
	}
	if i == n.n {
		i--
	}
	c, r := n.kids[i], n.kids[i+1]
	c.keys[c.n], c.blocks[c.n] = n.keys[i], n.blocks[i]
	copy(c.keys[c.n+1:], r.keys[:r.n])
	copy(c.blocks[c.n+1:], r.blocks[:r.n])
	if c.kids != nil {
		copy(c.kids[c.n+1:], r.kids[:r.n+1])
	}
	c.n += r.n + 1
	copy(n.keys[i:n.n-1], n.keys[i+1:n.n])
	copy(n.blocks[i:n.n-1], n.blocks[i+1:n.n])
	copy(n.kids[i+1:n.n], n.kids[i+2:n.n+1])
	n.n--
	n.blocks[n.n] = nil
	n.kids[n.n+1] = nil
	t.recycleNode(r)
	if n.n == 0 && n == t.root {
		t.root = c
		n.kids[0] = nil
		t.recycleNode(n)
		return c
	}
	return n
}

// newNode returns an empty node, with room for children when inner.
func (t *freeTree) newNode(inner bool) *freeNode {
	var n *freeNode
	if t.nodes != nil {
		n = t.nodes.get()
	}
	if n == nil {
		n = new(freeNode)
	}
	switch {
	case inner && n.kids == nil:
		n.kids = new([freeTreeMax + 1]*freeNode)
	case !inner:
		n.kids = nil
	}
	return n
}

// recycleNode keeps an emptied node for newNode.
func (t *freeTree) recycleNode(n *freeNode) {
	if t.nodes == nil {
		return
	}
	n.n = 0
	clear(n.blocks[:])
	if n.kids != nil {
		clear(n.kids[:])
	}
	t.nodes.free = append(t.nodes.free, n)
}

// ascend calls f on every block in key order until f returns false, and
// reports whether it went through all of them.
func (t *freeTree) ascend(f func(*Block) bool) bool {
	return t.root == nil || t.root.ascend(f)
}

func (n *freeNode) ascend(f func(*Block) bool) bool {
	for i := 0; i < n.n; i++ {
		if n.kids != nil && !n.kids[i].ascend(f) {
			return false
		}
		if !f(n.blocks[i]) {
			return false
		}
	}
	return n.kids == nil || n.kids[n.n].ascend(f)
}
