package memory

// Size classes of the caching pool. The values are those of PyTorch's
// CUDACachingAllocator, whose behaviour on real training traces is the
// reference we measure against (see doc.go for the reasoning behind each).
const (
	// MinBlockSize is the rounding granularity of every request: sizes are
	// rounded up to a multiple of 512 bytes, so every block address is
	// 512-byte aligned (enough for any vector load and for cuBLAS).
	MinBlockSize = 512
	// SmallSize is the largest request served by the small pool.
	SmallSize = 1 << 20
	// SmallBuffer is the segment size of the small pool: one backend call
	// serves many small requests.
	SmallBuffer = 2 << 20
	// LargeBuffer is the segment size for requests between SmallSize and
	// MinLargeAlloc.
	LargeBuffer = 20 << 20
	// MinLargeAlloc is the request size from which a request gets its own
	// segment, rounded up to RoundLarge.
	MinLargeAlloc = 10 << 20
	// RoundLarge is the rounding of segments for requests of MinLargeAlloc
	// bytes or more.
	RoundLarge = 2 << 20
)

// maxRequest is the largest request the pool accepts: rounding it up to
// RoundLarge must not overflow int64.
const maxRequest = 1<<62 - 1

// RoundSize returns the block size a request of size bytes occupies
// (size > 0): a multiple of MinBlockSize.
func RoundSize(size int64) int64 {
	if size < MinBlockSize {
		return MinBlockSize
	}
	return (size + MinBlockSize - 1) &^ (MinBlockSize - 1)
}

// SegmentSize returns the size of the segment the pool reserves from its
// backend when no cached block can serve a block of rounded size bytes.
func SegmentSize(rounded int64) int64 {
	switch {
	case rounded <= SmallSize:
		return SmallBuffer
	case rounded < MinLargeAlloc:
		return LargeBuffer
	default:
		return (rounded + RoundLarge - 1) &^ (RoundLarge - 1)
	}
}

// isSmall reports whether a block of rounded size bytes belongs to the small
// pool.
func isSmall(rounded int64) bool { return rounded <= SmallSize }
