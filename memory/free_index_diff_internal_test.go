package memory

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestFreeIndexDifferential checks freeIndex (hot slot, bypass, inline
// classes, trees) against a plain list of (stream, key) entries.
func TestFreeIndexDifferential(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			var x freeIndex
			ref := map[*Block]Stream{}
			var blocks []*Block
			nextAddr := uintptr(1 << 30)
			// sizes drawn from a few classes so classes fill and make trees
			sizes := []int64{512, 1024, 64 << 10, 65 << 10, 66<<10 + 512, 1 << 20, 1<<20 + 512, 3 << 20, 64 << 20, 64<<20 + 512}
			randSize := func() int64 {
				if rng.IntN(3) == 0 {
					return int64(1+rng.IntN(1<<14)) * MinBlockSize
				}
				return sizes[rng.IntN(len(sizes))] + int64(rng.IntN(3))*MinBlockSize
			}
			refTake := func(s Stream, lo, hi freeKey) *Block {
				var best *Block
				for b, bs := range ref {
					if bs != s {
						continue
					}
					k := keyOf(b)
					if k.less(lo) || !k.less(hi) {
						continue
					}
					if best == nil || k.less(keyOf(best)) {
						best = b
					}
				}
				return best
			}
			for step := 0; step < 20000; step++ {
				op := rng.IntN(10)
				if (step/2000)%2 == 0 && op >= 6 && rng.IntN(3) != 0 {
					op = 0 // growing phase
				}
				switch {
				case op < 4 || len(blocks) == 0:
					b := &Block{size: randSize(), addr: nextAddr}
					nextAddr += uintptr(rng.IntN(4)+1) << 30
					s := Stream(rng.IntN(3))
					x.insert(s, b)
					ref[b] = s
					blocks = append(blocks, b)
				case op < 6:
					i := rng.IntN(len(blocks))
					b := blocks[i]
					s := ref[b]
					if rng.IntN(5) == 0 {
						if x.delete(s+1, b) {
							t.Fatalf("step %d: deleted under the wrong stream", step)
						}
					}
					if !x.delete(s, b) {
						t.Fatalf("step %d: delete of a present block failed", step)
					}
					if x.delete(s, b) {
						t.Fatalf("step %d: deleted twice", step)
					}
					delete(ref, b)
					blocks[i] = blocks[len(blocks)-1]
					blocks = blocks[:len(blocks)-1]
				default:
					s := Stream(rng.IntN(3))
					lo := freeKey{size: randSize()}
					if rng.IntN(4) == 0 && len(blocks) > 0 {
						lo = keyOf(blocks[rng.IntN(len(blocks))])
						if rng.IntN(2) == 0 {
							lo.addr++
						}
					}
					hi := freeKey{size: 1<<63 - 1}
					switch rng.IntN(3) {
					case 0:
						hi = freeKey{size: lo.size + int64(rng.IntN(1<<12))*MinBlockSize, addr: uintptr(rng.Uint64())}
					case 1:
						if len(blocks) > 0 {
							hi = keyOf(blocks[rng.IntN(len(blocks))])
						}
					}
					want := refTake(s, lo, hi)
					var got *Block
					if x.hot == nil && rng.IntN(2) == 0 { // Pool.alloc's written-out take
						if got = x.takeClass(s, lo, hi); got != nil {
							x.len--
						}
					} else {
						got = x.take(s, lo, hi)
					}
					if got != want {
						t.Fatalf("step %d: take(%d, %v, %v): got %v, want %v", step, s, lo, hi, got, want)
					}
					if got != nil {
						delete(ref, got)
						for i, b := range blocks {
							if b == got {
								blocks[i] = blocks[len(blocks)-1]
								blocks = blocks[:len(blocks)-1]
								break
							}
						}
					}
				}
				if x.Len() != len(ref) {
					t.Fatalf("step %d: len %d, want %d", step, x.Len(), len(ref))
				}
				if step%500 == 0 {
					var prev *Block
					var prevS Stream
					n := 0
					x.ascend(func(b *Block) bool {
						s, ok := ref[b]
						if !ok {
							t.Fatalf("step %d: ascend: block not in the index", step)
						}
						if prev != nil && (s < prevS || s == prevS && !keyOf(prev).less(keyOf(b))) {
							t.Fatalf("step %d: ascend out of order", step)
						}
						prev, prevS = b, s
						n++
						return true
					})
					if step%5000 == 0 {
						trees := 0
						for _, cs := range append([]*classSet{&x.first}, x.more...) {
							for c := range cs.trees {
								if cs.trees[c].len > 0 {
									trees++
								}
							}
						}
						t.Logf("step %d: %d blocks, %d class trees", step, n, trees)
					}
					if n != len(ref) {
						t.Fatalf("step %d: ascend saw %d of %d", step, n, len(ref))
					}
				}
			}
		})
	}
}
