package cpukern

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ignoreIndex = -100

func randTargets(rows, cols int, seed uint64) []int32 {
	r := newRNG(seed)
	t := make([]int32, rows)
	for i := range t {
		t[i] = int32(r.IntN(cols))
		if r.IntN(5) == 0 {
			t[i] = ignoreIndex
		}
	}
	return t
}

func TestCrossEntropyMatchesReference(t *testing.T) {
	testCrossEntropy[float32](t)
	testCrossEntropy[float64](t)
}

func testCrossEntropy[T Float](t *testing.T) {
	for si, sh := range rowShapes {
		rows, cols := sh[0], sh[1]
		t.Run(shapeName(rows, cols)+"/"+dtypeName[T](), func(t *testing.T) {
			r := newRNG(uint64(si))
			logits := randSlice[T](r, rows*cols, -6, 6)
			targets := randTargets(rows, cols, uint64(si))
			sm, lsm := softmaxRef(logits, rows, cols)
			wantLoss := make([]float64, rows)
			wantCount := 0
			dloss := randSlice[T](r, rows, 0.5, 1.5)
			wantD := make([]float64, rows*cols)
			for row, tg := range targets {
				if tg == ignoreIndex {
					continue
				}
				wantCount++
				wantLoss[row] = -lsm[row*cols+int(tg)]
				for i := 0; i < cols; i++ {
					p := sm[row*cols+i]
					if i == int(tg) {
						p--
					}
					wantD[row*cols+i] = p * float64(dloss[row])
				}
			}
			loss := make([]T, rows)
			count, err := CrossEntropy(loss, logits, targets, rows, cols, ignoreIndex)
			require.NoError(t, err)
			assert.Equal(t, wantCount, count)
			requireClose(t, "loss", loss, wantLoss, tol[T](1e-6, 1e-13), tol[T](1e-6, 1e-13))
			d := make([]T, rows*cols)
			CrossEntropyBackward(d, logits, targets, dloss, rows, cols, ignoreIndex)
			requireClose(t, "dlogits", d, wantD, tol[T](2e-6, 1e-12), tol[T](1e-7, 1e-14))
			// In place over the logits.
			CrossEntropyBackward(logits, logits, targets, dloss, rows, cols, ignoreIndex)
			require.Equal(t, d, logits)
		})
	}
}

func TestCrossEntropyBackwardFiniteDifference(t *testing.T) {
	const rows, cols, h = 4, 5, 1e-6
	r := newRNG(21)
	logits := randSlice[float64](r, rows*cols, -3, 3)
	targets := []int32{2, ignoreIndex, 0, 4}
	dloss := randSlice[float64](r, rows, 0.5, 1.5)
	total := func(x []float64) float64 {
		loss := make([]float64, rows)
		_, err := CrossEntropy(loss, x, targets, rows, cols, ignoreIndex)
		require.NoError(t, err)
		return dot(loss, dloss)
	}
	d := make([]float64, rows*cols)
	CrossEntropyBackward(d, logits, targets, dloss, rows, cols, ignoreIndex)
	for i := range logits {
		xp := append([]float64(nil), logits...)
		xm := append([]float64(nil), logits...)
		xp[i] += h
		xm[i] -= h
		require.InDelta(t, (total(xp)-total(xm))/(2*h), d[i], 1e-8, "dlogits[%d]", i)
	}
}

func TestCrossEntropyLargeLogits(t *testing.T) {
	// The max subtraction keeps huge logits finite.
	loss := make([]float32, 1)
	_, err := CrossEntropy(loss, []float32{1e4, 0, -1e4}, []int32{1}, 1, 3, ignoreIndex)
	require.NoError(t, err)
	assert.InEpsilon(t, 1e4, float64(loss[0]), 1e-7)
}

func TestCrossEntropyBadTargets(t *testing.T) {
	logits := make([]float32, 6)
	loss := []float32{7, 7}
	_, err := CrossEntropy(loss, logits, []int32{1, 3}, 2, 3, ignoreIndex)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrIndex))
	assert.Equal(t, "cpukern: index out of range: cpukern.CrossEntropy: target of row 1 is 3, want a class in [0, 3) or the ignore index -100", err.Error())
	assert.Equal(t, []float32{7, 7}, loss, "loss written despite the error")
	_, err = CrossEntropy(loss, logits, []int32{-1, 0}, 2, 3, ignoreIndex)
	assert.ErrorContains(t, err, "row 0 is -1")
	// ignore may be a valid class: that row is skipped.
	count, err := CrossEntropy(loss, logits, []int32{1, 2}, 2, 3, 2)
	require.NoError(t, err)
	assert.Equal(t, 1, count)
	assert.Zero(t, loss[1])
	before := append([]float32(nil), logits...)
	err = CrossEntropyBackward(logits, logits, []int32{5, 0}, []float32{1, 1}, 2, 3, ignoreIndex)
	assert.ErrorIs(t, err, ErrIndex)
	assert.EqualError(t, err, "cpukern: index out of range: cpukern.CrossEntropyBackward: target of row 0 is 5, want a class in [0, 3) or the ignore index -100")
	assert.Equal(t, before, logits, "dlogits untouched")
}
