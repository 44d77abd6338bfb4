package memory

// EnvPoison=1 makes the pools over plain host memory (the CPU device's
// tiers) fill a block's bytes with 0xFF as it is freed (and as a move
// leaves it): a use after free or after a move then reads
// NaNs instead of the stale but still right values a cached block keeps
// until it is handed out again, which is what a pool that happens to give
// the same address back hides. A diagnostic for tests and bug hunts, off by
// default: off, it costs the free path one branch.
const EnvPoison = "STRATA_MEMORY_POISON"

// poisonFreed is EnvPoison on (1, true, yes, on), read once.
var poisonFreed = envOn(EnvPoison)

// hostOnly reports whether b is plain host memory, which only the CPU
// reads: a pool of pinned or device memory frees blocks that work queued
// on a GPU may still read, which the CPU must not overwrite then.
func hostOnly(b Backend) bool {
	_, ok := b.(interface{ plainHost() })
	return ok
}

// plainHost marks the host backends (hostVM embeds hostBackend) for
// hostOnly.
func (*hostBackend) plainHost() {}

// poison fills the bytes of live block b that the CPU can write with 0xFF
// (a float32 or float64 NaN, a -1 integer).
func poison(b *Block) {
	h := b.Host()
	for i := range h {
		h[i] = 0xFF
	}
}
