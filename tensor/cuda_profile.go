package tensor

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strata-ml/strata/cuda"
)

// EnvCUDAProfile turns on the per-kernel profile of CUDA devices: every
// launch and cuBLAS call is followed by a stream synchronization and its
// wall time is added to a table (CUDAProfile prints it). It serialises
// the device, so it measures where the time goes, not peak speed.
const EnvCUDAProfile = "STRATA_CUDA_PROFILE"

var cudaProfiling = os.Getenv(EnvCUDAProfile) != ""

type profEntry struct {
	calls int
	dur   time.Duration
}

var (
	profMu    sync.Mutex
	profTable = map[string]*profEntry{}
)

// profileDone synchronizes d's stream and charges the time since start to
// key. Call it only when cudaProfiling is set.
func (d *cudaDevice) profileDone(key string, start time.Time) {
	if err := d.stream.Synchronize(); err != nil {
		panic(&OpError{Op: key, Msg: "profiling synchronization", Err: err})
	}
	el := time.Since(start)
	profMu.Lock()
	e := profTable[key]
	if e == nil {
		e = &profEntry{}
		profTable[key] = e
	}
	e.calls++
	e.dur += el
	profMu.Unlock()
}

// CUDAProfile returns the table collected under STRATA_CUDA_PROFILE (ops
// and kernels by total time, with calls and the driver-call count), and
// resets it. Empty when profiling is off.
func CUDAProfile() string {
	if !cudaProfiling {
		return ""
	}
	profMu.Lock()
	defer profMu.Unlock()
	keys := make([]string, 0, len(profTable))
	var total time.Duration
	calls := 0
	for k, e := range profTable {
		keys = append(keys, k)
		total += e.dur
		calls += e.calls
	}
	slices.SortFunc(keys, func(a, b string) int { return int(profTable[b].dur - profTable[a].dur) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "| op / kernel | calls | total ms | share | µs per call |\n|---|---|---|---|---|\n")
	for _, k := range keys {
		e := profTable[k]
		fmt.Fprintf(&sb, "| %s | %d | %.2f | %.1f%% | %.1f |\n", k, e.calls, e.dur.Seconds()*1e3,
			100*e.dur.Seconds()/max(total.Seconds(), 1e-12), e.dur.Seconds()*1e6/float64(e.calls))
	}
	fmt.Fprintf(&sb, "| total | %d | %.2f | 100%% | |\n(driver calls so far: %d)\n", calls, total.Seconds()*1e3, cuda.DriverCalls())
	clear(profTable)
	return sb.String()
}
