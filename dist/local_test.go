package dist_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/tensor"
)

// runRanks runs fn for every rank of a local group of n on its own
// goroutine and its own Ctx, and returns their errors; it fails the test
// when the ranks do not all return within the timeout (a hang).
func runRanks(t *testing.T, n int, timeout time.Duration, fn func(c *tensor.Ctx, coll dist.Collective) error) []error {
	t.Helper()
	group := dist.NewLocalGroup(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := tensor.NewCtx()
			errs[r] = fn(c, group[r])
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("ranks did not return within %v (deadlock)", timeout)
	}
	return errs
}

// inScope runs fn in a scope of c and returns its error or an op panic's.
func inScope(c *tensor.Ctx, fn func() error) error {
	var err error
	if perr := tensor.Try(func() { c.WithScope(func() { err = fn() }) }); perr != nil {
		return perr
	}
	return err
}

func TestLocalGroupCollectives(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			const k = 3 // chunk size
			res := make([][3][]float64, n)
			errs := runRanks(t, n, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
				r := coll.Rank()
				if coll.Size() != n {
					return fmt.Errorf("size %d", coll.Size())
				}
				vals := make([]float64, n*k)
				for i := range vals {
					vals[i] = float64(100*r + i)
				}
				return inScope(c, func() error {
					a := c.FromFloat32s(tensor.CPU(), f32(vals), n, k)
					if err := coll.AllReduceSum(a); err != nil {
						return err
					}
					b := c.FromFloat64s(tensor.CPU(), vals, n*k)
					if err := coll.ReduceScatterSum(b); err != nil {
						return err
					}
					g := c.FromFloat32s(tensor.CPU(), f32(vals), n*k)
					if err := coll.AllGather(g); err != nil {
						return err
					}
					res[r] = [3][]float64{a.Float64s(), b.Float64s()[r*k : (r+1)*k], g.Float64s()}
					return nil
				})
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for r := range n {
				for i := range n * k {
					sum := 0.0
					for q := range n {
						sum += float64(100*q + i)
					}
					assert.Equal(t, sum, res[r][0][i], "AllReduceSum rank %d element %d", r, i)
					if i/k == r {
						assert.Equal(t, sum, res[r][1][i-r*k], "ReduceScatterSum rank %d element %d", r, i)
					}
					assert.Equal(t, float64(100*(i/k)+i), res[r][2][i], "AllGather rank %d element %d", r, i)
				}
			}
		})
	}
}

// TestLocalGroupRankOrder: the sum is in rank order and rounded once, so
// every rank gets the same bits even where float32 addition is not
// associative.
func TestLocalGroupRankOrder(t *testing.T) {
	in := []float32{1e8, 1, -1e8, 1} // per rank, one element
	var got [4]float32
	errs := runRanks(t, 4, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
		return inScope(c, func() error {
			x := c.FromFloat32s(tensor.CPU(), []float32{in[coll.Rank()]}, 1)
			if err := coll.AllReduceSum(x); err != nil {
				return err
			}
			got[coll.Rank()] = x.Float32s()[0]
			return nil
		})
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for r := range 4 {
		assert.Equal(t, float32(2), got[r], "rank %d (float64 accumulation in rank order)", r)
	}
}

func TestLocalGroupMismatch(t *testing.T) {
	cases := map[string]func(c *tensor.Ctx, r int) (*tensor.Tensor, func(dist.Collective, *tensor.Tensor) error){
		"size": func(c *tensor.Ctx, r int) (*tensor.Tensor, func(dist.Collective, *tensor.Tensor) error) {
			return c.Zeros(tensor.CPU(), tensor.Float32, 4+r), dist.Collective.AllReduceSum
		},
		"dtype": func(c *tensor.Ctx, r int) (*tensor.Tensor, func(dist.Collective, *tensor.Tensor) error) {
			dt := tensor.Float32
			if r == 1 {
				dt = tensor.Float64
			}
			return c.Zeros(tensor.CPU(), dt, 4), dist.Collective.AllReduceSum
		},
		"op": func(c *tensor.Ctx, r int) (*tensor.Tensor, func(dist.Collective, *tensor.Tensor) error) {
			if r == 1 {
				return c.Zeros(tensor.CPU(), tensor.Float32, 4), dist.Collective.AllGather
			}
			return c.Zeros(tensor.CPU(), tensor.Float32, 4), dist.Collective.AllReduceSum
		},
		"indivisible": func(c *tensor.Ctx, r int) (*tensor.Tensor, func(dist.Collective, *tensor.Tensor) error) {
			return c.Zeros(tensor.CPU(), tensor.Float32, 5), dist.Collective.ReduceScatterSum
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			later := make([]error, 3)
			errs := runRanks(t, 3, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
				var err error
				_ = inScope(c, func() error {
					x, call := mk(c, coll.Rank())
					err = call(coll, x)
					// The group stays failed: a later call errors at once.
					later[coll.Rank()] = coll.AllReduceSum(c.Zeros(tensor.CPU(), tensor.Float32, 1))
					return nil
				})
				return err
			})
			for r := range 3 {
				assert.ErrorIs(t, errs[r], dist.ErrMismatch, "rank %d", r)
				assert.ErrorIs(t, later[r], dist.ErrAborted, "rank %d, later call", r)
				assert.ErrorIs(t, later[r], dist.ErrMismatch, "rank %d, later call", r)
			}
		})
	}
}

// TestLocalGroupAbort: a rank that fails (Abort) or makes a bad call
// fails the others' pending calls instead of leaving them waiting.
func TestLocalGroupAbort(t *testing.T) {
	boom := errors.New("boom")
	t.Run("abort", func(t *testing.T) {
		errs := runRanks(t, 4, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			if coll.Rank() == 2 {
				time.Sleep(20 * time.Millisecond) // the others are waiting by now
				coll.Abort(boom)
				return nil
			}
			return inScope(c, func() error { return coll.AllReduceSum(c.Zeros(tensor.CPU(), tensor.Float32, 8)) })
		})
		for _, r := range []int{0, 1, 3} {
			assert.ErrorIs(t, errs[r], dist.ErrAborted, "rank %d", r)
			assert.ErrorIs(t, errs[r], boom, "rank %d", r)
		}
	})
	t.Run("bad call", func(t *testing.T) {
		errs := runRanks(t, 2, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			return inScope(c, func() error {
				x := c.Zeros(tensor.CPU(), tensor.Float32, 4, 2)
				if coll.Rank() == 1 {
					x = x.T() // not contiguous
				}
				return coll.AllReduceSum(x)
			})
		})
		assert.ErrorIs(t, errs[1], tensor.ErrArgument)
		assert.ErrorIs(t, errs[0], dist.ErrAborted)
		assert.ErrorIs(t, errs[0], tensor.ErrArgument)
	})
	t.Run("int32", func(t *testing.T) {
		errs := runRanks(t, 2, 10*time.Second, func(c *tensor.Ctx, coll dist.Collective) error {
			return inScope(c, func() error { return coll.AllReduceSum(c.FromInt32s(tensor.CPU(), []int32{1}, 1)) })
		})
		for r := range 2 {
			assert.ErrorIs(t, errs[r], tensor.ErrDType, "rank %d", r)
		}
	})
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
