package memory

// historyCopyChunk is the most events a copy of the ring takes per hold
// of the lock (some 450 KiB, tens of microseconds): a full ring of
// MaxHistoryCapacity events took the manager's lock for the whole copy,
// 1.8 GB, stalling every allocation of every tier meanwhile. A variable
// so that tests can make it small.
var historyCopyChunk uint64 = 1 << 12

// historyCopyTries is the copies tried a chunk at a time before one is
// made in a single hold of the lock, for recorders that lap the ring
// while it is copied.
const historyCopyTries = 3

// historyChunkHook, when set (by tests), runs between the chunks of a
// copy, outside the lock.
var historyChunkHook func()

// copyRing copies the events of r, which mu guards, oldest first: a cut
// of the recording at the moment the copy began (its newest event is the
// newest then), taken a chunk at a time, newest first, so that
// allocations go on while a large ring is copied. Events that a recorder
// overwrites before their chunk was copied are lost from the front, as
// if they had left the ring before the cut: the events returned are in
// order, without a gap, and past is the state before the first of them.
func (r *recorder) copyRing(mu *mutex) (events []Event, past ringState) {
	for range historyCopyTries - 1 {
		mu.Lock()
		lo, hi, past := r.oldest(), r.n, r.past
		mu.Unlock()
		events = make([]Event, hi-lo) // outside the lock: it may be large
		if from, past, ok := r.copyChunks(mu, events, lo, hi, past); ok {
			return events[from-lo:], past
		}
	}
	mu.Lock()
	defer mu.Unlock()
	lo, hi := r.oldest(), r.n
	events = make([]Event, hi-lo)
	for seq := lo; seq < hi; seq++ {
		events[seq-lo] = *r.at(seq)
	}
	return events, r.past
}

// copyChunks copies the events [lo, hi) of r into events, newest first,
// taking mu for each chunk. past is the state before lo. It returns the
// Seq of the first event copied and the state before it; ok is false when
// the recorder overwrote every event of the cut meanwhile.
func (r *recorder) copyChunks(mu *mutex, events []Event, lo, hi uint64, past ringState) (uint64, ringState, bool) {
	s := hi // events [s, hi) are copied
	for s > lo {
		mu.Lock()
		o := r.oldest()
		if o >= hi { // lapped: every event of the cut left the ring
			mu.Unlock()
			return 0, past, false
		}
		if o >= s { // overtaken: [lo, s) left the ring; so did [s, o), copied
			past = r.past
			for i := o; i > s; i-- {
				past.apply(&events[i-1-lo], -1)
			}
			mu.Unlock()
			return s, past, true
		}
		c := max(lo, o)
		if s-c > historyCopyChunk {
			c = s - historyCopyChunk
		}
		for seq := c; seq < s; seq++ {
			events[seq-lo] = *r.at(seq)
		}
		s = c
		if s == o && o > lo { // reached the oldest event, [lo, o) lost
			past = r.past
			mu.Unlock()
			return s, past, true
		}
		mu.Unlock()
		if historyChunkHook != nil {
			historyChunkHook()
		}
	}
	return lo, past, true
}

// history is the History of the events a copy of r holds.
func (r *recorder) history(backends [NumTiers]string, events []Event, past ringState) *History {
	h := &History{Start: r.start, Backends: backends, Before: past.before, Capacity: int(r.capacity), Events: events}
	for _, d := range past.dropped {
		h.Dropped += d
	}
	return h
}
