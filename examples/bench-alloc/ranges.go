package main

import "slices"

// rangeSet is a set of disjoint address ranges [start, end), sorted: the
// memory a trace shows PyTorch holding. Segments of classic pools come and
// go whole (segment_alloc, segment_free); expandable segments map and unmap
// pieces (segment_map, segment_unmap) that need not match the pieces mapped
// before, so removal splits ranges. A sorted slice, searched by bisection,
// is enough for the few thousand segments a device holds at once.
type rangeSet struct{ r []addrRange }

type addrRange struct{ start, end uint64 }

// add inserts [addr, addr+size), merging it with ranges it touches, and
// returns the bytes that were not in the set before.
func (s *rangeSet) add(addr uint64, size int64) int64 {
	lo, hi := addr, addr+uint64(size)
	covered := s.overlap(lo, hi)
	i, _ := slices.BinarySearchFunc(s.r, lo, func(a addrRange, x uint64) int {
		if a.end < x {
			return -1
		}
		return 1
	})
	j := i
	for j < len(s.r) && s.r[j].start <= hi {
		lo, hi = min(lo, s.r[j].start), max(hi, s.r[j].end)
		j++
	}
	s.r = slices.Replace(s.r, i, j, addrRange{lo, hi})
	return size - covered
}

// remove takes [addr, addr+size) out of the set and returns the bytes of
// it that were in the set.
func (s *rangeSet) remove(addr uint64, size int64) int64 {
	lo, hi := addr, addr+uint64(size)
	removed := s.overlap(lo, hi)
	var kept []addrRange
	i := s.firstEndingAfter(lo)
	j := i
	for ; j < len(s.r) && s.r[j].start < hi; j++ {
		if a := s.r[j]; a.start < lo {
			kept = append(kept, addrRange{a.start, lo})
		}
		if a := s.r[j]; a.end > hi {
			kept = append(kept, addrRange{hi, a.end})
		}
	}
	s.r = slices.Replace(s.r, i, j, kept...)
	return removed
}

// overlap returns the bytes of [lo, hi) in the set.
func (s *rangeSet) overlap(lo, hi uint64) int64 {
	var n int64
	// From the first range that ends after lo: a scan from the start
	// would make a long trace over many segments quadratic.
	for _, a := range s.r[s.firstEndingAfter(lo):] {
		if a.start >= hi {
			break
		}
		if a.end > lo {
			n += int64(min(a.end, hi) - max(a.start, lo))
		}
	}
	return n
}

// contains reports whether addr lies in the set.
func (s *rangeSet) contains(addr uint64) bool {
	_, found := slices.BinarySearchFunc(s.r, addr, func(a addrRange, x uint64) int {
		switch {
		case a.end <= x:
			return -1
		case a.start > x:
			return 1
		}
		return 0
	})
	return found
}

// firstEndingAfter returns the index of the first range that ends after
// addr, or len(s.r).
func (s *rangeSet) firstEndingAfter(addr uint64) int {
	i, _ := slices.BinarySearchFunc(s.r, addr, func(a addrRange, x uint64) int {
		if a.end <= x {
			return -1
		}
		return 1
	})
	return i
}
