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

// run times one allocator on one workload: warm up, find by runs of
// growing length how many pairs last minTime, then time reps runs of that
// many pairs. The median run is the result: a machine shared with other
// work (the GPU hosts are) stalls some runs, and the median is what the
// allocator costs when it is not stalled; min and max show the spread.
func run(a allocator, w workload, seq mixedSeq, minTime time.Duration, reps int) (result, error) {
	res := result{Allocator: a.name(), Workload: w.name}
	var step func(n int) error
	var cleanup func() error
	if w.size > 0 {
		step = func(n int) error {
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
		cleanup = func() error { return nil }
	} else {
		for s := range liveSlots {
			if err := a.alloc(s, seq.sizes[s]); err != nil {
				return res, err
			}
		}
		pos := liveSlots
		step = func(n int) error {
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
		cleanup = func() error {
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
	if err := step(warm); err != nil {
		return res, err
	}
	runtime.GC()
	n := 1
	for {
		start := time.Now()
		if err := step(n); err != nil {
			return res, err
		}
		el := time.Since(start)
		if el >= minTime || n >= 1<<30 {
			break
		}
		// Aim past minTime, growing at least 2x and at most 100x.
		next := int(float64(n) * 1.2 * float64(minTime) / float64(max(el, time.Microsecond)))
		n = min(max(next, 2*n), 100*n, 1<<30)
	}
	calls, backend := cuda.DriverCalls(), a.backendAllocs()
	ns := make([]float64, reps)
	for i := range ns {
		start := time.Now()
		if err := step(n); err != nil {
			return res, err
		}
		ns[i] = float64(time.Since(start).Nanoseconds()) / float64(n)
	}
	slices.Sort(ns)
	total := float64(n) * float64(reps)
	res.Pairs, res.Reps = n, reps
	res.NsPerPair, res.NsMin, res.NsMax = median(ns), ns[0], ns[reps-1]
	res.DriverCallsPerPair = float64(cuda.DriverCalls()-calls) / total
	res.BackendAllocsPerPair = -1
	if backend >= 0 {
		res.BackendAllocsPerPair = float64(a.backendAllocs()-backend) / total
	}
	if err := cleanup(); err != nil {
		return res, fmt.Errorf("freeing the live blocks: %w", err)
	}
	return res, nil
}

// median returns the middle of sorted values (the mean of the two middle
// ones for an even count).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
