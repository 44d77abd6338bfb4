package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/strata-ml/strata/cuda"
)

// The mixed workload: liveSlots blocks live at once, sizes log-uniform
// from mixedMin to mixedMax, one random slot replaced per pair. The
// sequence (mixedLen sizes and slots) comes from the seed, so every
// allocator sees exactly the same requests.
const (
	liveSlots = 256
	mixedLen  = 1 << 16
	mixedMin  = 512
	mixedMax  = 32 << 20
	mixedWarm = 1024 // untimed replacements after the slots are filled
)

// workload is a fixed size, or the mixed sequence when size is 0.
type workload struct {
	name string
	size int64
}

var workloads = []workload{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}, {"mixed", 0}}

// mixedSeq is the mixed workload's requests.
type mixedSeq struct {
	sizes []int64
	slots []int
}

func newMixedSeq(seed uint64) mixedSeq {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	m := mixedSeq{sizes: make([]int64, mixedLen), slots: make([]int, mixedLen)}
	lo, hi := math.Log(mixedMin), math.Log(mixedMax)
	for i := range m.sizes {
		m.sizes[i] = int64(math.Exp(lo + rng.Float64()*(hi-lo)))
		m.slots[i] = rng.IntN(liveSlots)
	}
	return m
}

// result is one allocator on one workload.
type result struct {
	Allocator string `json:"allocator"`
	Workload  string `json:"workload"`
	// NsPerPair is the median over Reps timed runs of Pairs pairs each;
	// NsMin and NsMax are the fastest and slowest run.
	NsPerPair float64 `json:"ns_per_pair"`
	NsMin     float64 `json:"ns_per_pair_min"`
	NsMax     float64 `json:"ns_per_pair_max"`
	Reps      int     `json:"reps"`
	Pairs     int     `json:"pairs"`
	// DriverCallsPerPair counts calls into the CUDA driver in the timed
	// runs (0 on the CPU).
	DriverCallsPerPair float64 `json:"driver_calls_per_pair"`
	// BackendAllocsPerPair counts segments reserved from the backend in
	// the timed runs; -1 for the driver's allocators, which always ask.
	BackendAllocsPerPair float64 `json:"backend_allocs_per_pair"`
}

// timer is one allocator set up on one workload, ready for timed runs.
type timer struct {
	a       allocator
	res     result
	step    func(n int) error // n pairs, then the allocator's sync
	cleanup func() error      // frees the mixed workload's live blocks
	ns      []float64         // ns per pair of each timed run
	calls   uint64            // driver calls in the timed runs
	backend int64             // backend allocations in the timed runs, -1 if unknown
}

// newTimer prepares a on w: fills the mixed workload's slots, warms up,
// and finds by runs of growing length how many pairs last minTime.
func newTimer(a allocator, w workload, seq mixedSeq, minTime time.Duration) (*timer, error) {
	t := &timer{a: a, res: result{Allocator: a.name(), Workload: w.name}, cleanup: func() error { return nil }}
	if w.size > 0 {
		t.step = func(n int) error {
			for range n {
				if err := a.alloc(0, w.size); err != nil {
					return err
				}
				if err := a.free(0); err != nil {
					return err
				}
			}
			return a.sync()
		}
	} else {
		for s := range liveSlots {
			if err := a.alloc(s, seq.sizes[s]); err != nil {
				return nil, err
			}
		}
		pos := liveSlots
		t.step = func(n int) error {
			for range n {
				j := pos % mixedLen
				pos++
				s := seq.slots[j]
				if err := a.free(s); err != nil {
					return err
				}
				if err := a.alloc(s, seq.sizes[j]); err != nil {
					return err
				}
			}
			return a.sync()
		}
		t.cleanup = func() error {
			for s := range liveSlots {
				if err := a.free(s); err != nil {
					return err
				}
			}
			return a.sync()
		}
	}
	warm := 1
	if w.size == 0 {
		warm = mixedWarm
	}
	if err := t.step(warm); err != nil {
		return nil, err
	}
	n := 1
	for {
		start := time.Now()
		if err := t.step(n); err != nil {
			return nil, err
		}
		el := time.Since(start)
		if el >= minTime || n >= 1<<30 {
			break
		}
		// Aim past minTime, growing at least 2x and at most 100x.
		next := int(float64(n) * 1.2 * float64(minTime) / float64(max(el, time.Microsecond)))
		n = min(max(next, 2*n), 100*n, 1<<30)
	}
	t.res.Pairs = n
	if a.backendAllocs() < 0 {
		t.backend = -1
	}
	return t, nil
}

// timeRun times one run of the calibrated number of pairs.
func (t *timer) timeRun() error {
	runtime.GC()
	n := t.res.Pairs
	calls, backend := cuda.DriverCalls(), t.a.backendAllocs()
	start := time.Now()
	if err := t.step(n); err != nil {
		return err
	}
	t.ns = append(t.ns, float64(time.Since(start).Nanoseconds())/float64(n))
	t.calls += cuda.DriverCalls() - calls
	if t.backend >= 0 {
		t.backend += t.a.backendAllocs() - backend
	}
	return nil
}

// finish frees the live blocks and returns the result of the timed runs:
// their median, fastest and slowest, and the driver calls and backend
// allocations per pair.
func (t *timer) finish() (result, error) {
	res := t.res
	ns := slices.Sorted(slices.Values(t.ns))
	res.Reps = len(ns)
	res.NsPerPair, res.NsMin, res.NsMax = median(ns), ns[0], ns[len(ns)-1]
	total := float64(res.Pairs) * float64(res.Reps)
	res.DriverCallsPerPair = float64(t.calls) / total
	res.BackendAllocsPerPair = -1
	if t.backend >= 0 {
		res.BackendAllocsPerPair = float64(t.backend) / total
	}
	if err := t.cleanup(); err != nil {
		return res, fmt.Errorf("freeing the live blocks: %w", err)
	}
	return res, nil
}

// median returns the middle of the values, in any order (the mean of the
// two middle ones for an even count); it leaves values as they are.
func median(values []float64) float64 {
	sorted := slices.Sorted(slices.Values(values))
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
