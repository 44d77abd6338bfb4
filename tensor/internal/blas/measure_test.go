//go:build (linux || darwin || freebsd || netbsd) && !android && (amd64 || arm64)

package blas

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMeasureStrategies produces the tables in doc.go. It is skipped
// unless STRATA_BLAS_MEASURE=1, takes about a minute, and is meant for a
// quiet machine: the strategies run round-robin, several rounds, and
// the best and median rate of each are printed, so that load from other
// processes shows as a gap between the two rather than as a wrong
// ranking.
//
//	STRATA_BLAS_MEASURE=1 go test -run TestMeasure -v ./tensor/internal/blas
func TestMeasureStrategies(t *testing.T) {
	if os.Getenv("STRATA_BLAS_MEASURE") == "" {
		t.Skip("set STRATA_BLAS_MEASURE=1 to measure")
	}
	lib := discovered()
	if lib.lib == nil || lib.lib.kind != "openblas" {
		t.Skipf("needs OpenBLAS: %s", Backend())
	}
	setLib := lib.lib.sym("openblas_set_num_threads")
	defer call(setLib, 1)
	gon := gonumBackend("measure")
	type strategy struct {
		name string
		run  func(f func())
	}
	use := func(b *backend, goThreads, libThreads int) func(func()) {
		return func(f func()) {
			old := useBackend(b)
			call(setLib, uintptr(libThreads))
			withThreads(goThreads, f)
			call(setLib, 1)
			useBackend(old)
			if libThreads > 1 {
				// OpenBLAS's pool threads spin for up to 2^28 cycles after
				// a call; let them fall asleep before the next strategy.
				time.Sleep(300 * time.Millisecond)
			}
		}
	}
	strategies := []strategy{
		{"split", use(lib, 2, 1)},        // the package's choice
		{"lib-1thread", use(lib, 1, 1)},  // no parallelism at all
		{"lib-2threads", use(lib, 1, 2)}, // OpenBLAS's own pool
		{"gonum", use(gon, 2, 1)},        // the generic fallback
	}
	for _, kr := range kernels { // the own GEMM
		strategies = append(strategies, strategy{"go " + kr.name[:strings.Index(kr.name, " ")], use(ownBackend("measure", kr), 2, 1)})
	}
	fmt.Printf("%s\n%-28s", Backend(), "GFLOP/s best (median)")
	for _, s := range strategies {
		fmt.Printf(" %20s", s.name)
	}
	fmt.Println()
	for _, s := range benchShapes {
		c, x, y, z := benchOperands(s)
		product := func() {
			if s.batch == 1 {
				Sgemm(c.tA, c.tB, c.m, c.n, c.k, 1, x, c.lda, y, c.ldb, 0, z, c.ldc)
				return
			}
			SgemmStridedBatched(c.tA, c.tB, c.m, c.n, c.k, 1, x, c.lda, s.m*s.k, y, c.ldb, s.k*s.n,
				0, z, c.ldc, s.m*s.n, s.batch)
		}
		flops := 2 * float64(s.m*s.n*s.k*s.batch)
		rates := make([][]float64, len(strategies))
		for range 7 {
			for i, st := range strategies {
				st.run(func() { rates[i] = append(rates[i], flops/timeBest(product, 20*time.Millisecond)/1e9) })
			}
		}
		fmt.Printf("%-28s", s.name)
		for i := range strategies {
			slices.Sort(rates[i])
			fmt.Printf(" %20s", fmt.Sprintf("%.1f (%.1f)", rates[i][len(rates[i])-1], rates[i][len(rates[i])/2]))
		}
		fmt.Println()
	}

	// A product followed by Go work on two goroutines, as a training step
	// interleaves matmuls with elementwise ops: a library pool that spins
	// after its call slows the Go work that follows.
	c, x, y, z := benchOperands(benchShapes[1])
	v := make([]float32, 1<<20)
	goWork := func() {
		var wg sync.WaitGroup
		for h := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				part := v[h*len(v)/2 : (h+1)*len(v)/2]
				for i := range part {
					part[i] = part[i]*0.999 + 0.001
				}
			}()
		}
		wg.Wait()
	}
	// Blocks of 100 steps per strategy, five rounds, the pool asleep
	// before each block; the best block median of each is printed.
	fmt.Printf("\nstep = qkv product, then Go work on 2 goroutines (1M floats); µs, best block median:\n")
	type result struct{ step, product, work float64 }
	best := map[string]result{}
	steps := append(strategies[:3:3], strategy{"Go work alone", use(lib, 2, 1)})
	for range 5 {
		for _, st := range steps {
			time.Sleep(300 * time.Millisecond)
			var stepT, prodT, workT []float64
			st.run(func() {
				for range 100 {
					t0 := time.Now()
					if st.name != "Go work alone" {
						Sgemm(c.tA, c.tB, c.m, c.n, c.k, 1, x, c.lda, y, c.ldb, 0, z, c.ldc)
					}
					t1 := time.Now()
					goWork()
					t2 := time.Now()
					stepT = append(stepT, t2.Sub(t0).Seconds()*1e6)
					prodT = append(prodT, t1.Sub(t0).Seconds()*1e6)
					workT = append(workT, t2.Sub(t1).Seconds()*1e6)
				}
			})
			r := result{median(stepT), median(prodT), median(workT)}
			if b, ok := best[st.name]; !ok || r.step < b.step {
				best[st.name] = r
			}
		}
	}
	for _, st := range steps {
		r := best[st.name]
		fmt.Printf("  %-14s step %4.0f = product %4.0f + Go work %4.0f\n", st.name, r.step, r.product, r.work)
	}
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// timeBest runs f repeatedly for about d and returns the best time of
// one call, in seconds.
func timeBest(f func(), d time.Duration) float64 {
	f()
	best := 1e9
	for start := time.Now(); time.Since(start) < d; {
		t0 := time.Now()
		f()
		best = min(best, time.Since(t0).Seconds())
	}
	return best
}
