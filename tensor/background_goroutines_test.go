package tensor_test

// Background's scopes used from two goroutines at once (the README's
// program run twice concurrently with the package-level functions): a
// misuse that used to release one goroutine's tensors from the other's
// scope, giving spurious "was released" errors and once a crash (a slice
// out of range inside Try). It must be reported as an error naming the
// misuse, never a crash or a wrong value.

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/tensor"
)

// backgroundWorker is the README's shape of program on Background: a
// scope for its data, then steps that each run in a scope of their own.
// It returns the first error of its steps and a panic that was no
// *OpError, if any.
func backgroundWorker(steps int) (crash any, err error) {
	defer func() {
		if r := recover(); r != nil {
			if oe, ok := r.(*tensor.OpError); ok {
				err = errors.Join(err, oe)
				return
			}
			crash = fmt.Sprintf("%v\n%s", r, debug.Stack())
		}
	}()
	s := tensor.NewScope()
	defer s.Close()
	x := tensor.FromFloat32s(cpu, []float32{0, 0, 0, 1, 1, 0, 1, 1}, 4, 2)
	w := tensor.FromFloat32s(cpu, []float32{1, 2, 3, 4, 5, 6, 7, 8}, 2, 4)
	for range steps {
		e := tensor.Try(func() {
			tensor.WithScope(func() {
				h := tensor.MatMul(x, w)
				r := tensor.Unary(tensor.OpRelu, tensor.Add(h, h))
				sum := tensor.Sum(r, false).Item()
				if sum != 144 {
					panic(fmt.Sprintf("wrong sum %v", sum))
				}
			})
		})
		if e != nil {
			return nil, e
		}
	}
	return nil, nil
}

func TestBackgroundFromTwoGoroutines(t *testing.T) {
	misuse := 0
	for range 300 {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		crashes := make([]any, 2)
		for g := range 2 {
			wg.Go(func() { crashes[g], errs[g] = backgroundWorker(20) })
		}
		wg.Wait()
		for g := range 2 {
			require.Nil(t, crashes[g], "goroutine %d crashed", g)
			if errs[g] == nil {
				continue
			}
			if misuse == 0 {
				t.Log(errs[g])
			}
			misuse++
			msg := errs[g].Error()
			require.True(t, strings.Contains(msg, "tensor.NewCtx"), "goroutine %d: %v", g, errs[g])
		}
	}
	t.Logf("%d of 600 runs reported the misuse", misuse)
	// Background is usable again once both are done.
	tensor.WithScope(func() {
		require.Equal(t, 6.0, tensor.Sum(tensor.FromFloat32s(cpu, []float32{1, 2, 3}, 3), false).Item())
	})
}

// Closing a scope that is not the innermost closes it alone and panics
// with ErrArgument ("out of order"); the child stays open and closes
// later. It used to close the child too, silently.
func TestScopeClosedOutOfOrder(t *testing.T) {
	c := tensor.NewCtx()
	outer := c.NewScope()
	a := c.Zeros(cpu, tensor.Float32, 2)
	inner := c.NewScope()
	b := c.Zeros(cpu, tensor.Float32, 2)
	err := tensor.Try(outer.Close)
	require.ErrorIs(t, err, tensor.ErrArgument)
	require.Contains(t, err.Error(), "scope closed out of order")
	require.True(t, a.Released())
	require.False(t, b.Released())
	inner.Close()
	require.True(t, b.Released())
	// The stack is empty again: a new tensor is owned by no scope.
	c.WithScope(func() { c.Zeros(cpu, tensor.Float32, 1) })
	require.Zero(t, c.BytesInUse())
}

// Deterministically: while goroutine 2's scope is the innermost of
// Background, goroutine 1's ops are refused with ErrArgument naming the
// misuse (their results would be released by goroutine 2's scope);
// goroutine 2's own ops work. A goroutine that opens a scope while its
// parent waits (a subtest) is no misuse.
func TestBackgroundScopeOfAnotherGoroutine(t *testing.T) {
	tensor.WithScope(func() {
		x := tensor.Ones(cpu, tensor.Float32, 2)
		opened, done := make(chan struct{}), make(chan struct{})
		finished := make(chan error)
		go func() {
			finished <- tensor.Try(func() {
				tensor.WithScope(func() {
					close(opened)
					<-done
					require.Equal(t, []float32{1, 1}, tensor.Ones(cpu, tensor.Float32, 2).Float32s())
				})
			})
		}()
		<-opened
		err := tensor.Try(func() { tensor.Add(x, x) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		require.Contains(t, err.Error(), "tensor.NewCtx")
		close(done)
		require.NoError(t, <-finished)
		require.Equal(t, []float32{2, 2}, tensor.Add(x, x).Float32s())

		// A goroutine working while this one waits.
		go func() {
			finished <- tensor.Try(func() {
				tensor.WithScope(func() { tensor.Add(x, tensor.Ones(cpu, tensor.Float32, 2)).Float32s() })
			})
		}()
		require.NoError(t, <-finished)
	})
}
