package cpukern

import (
	"fmt"
	"math"
)

// checkTargets returns an error naming the first target that is neither
// ignore nor a class in [0, cols).
func checkTargets(kernel string, targets []int32, cols int, ignore int32) error {
	for r, t := range targets {
		if t != ignore && (t < 0 || int(t) >= cols) {
			return fmt.Errorf("%w: cpukern.%s: target of row %d is %d, want a class in [0, %d) or the ignore index %d",
				ErrIndex, kernel, r, t, cols, ignore)
		}
	}
	return nil
}

// CrossEntropy sets loss[r] = logsumexp(logits[r]) - logits[r][targets[r]]
// for the (rows, cols) logits, and returns the number of rows counted.
// Rows whose target equals ignore get loss 0 and are not counted (ignore
// may itself be a valid class, as PyTorch's ignore_index). Targets are
// all checked first: one outside [0, cols) that is not ignore returns an
// error wrapping ErrIndex naming the row and value, with loss untouched.
// logsumexp subtracts the row max and sums exp in float64. Mismatched
// lengths panic.
func CrossEntropy[T Float](loss []T, logits []T, targets []int32, rows, cols int, ignore int32) (count int, err error) {
	return CrossEntropyLD(loss, logits, targets, rows, cols, cols, ignore)
}

// CrossEntropyLD is CrossEntropy over rows that lie ld elements apart in
// logits (rows, ld): the first cols of each row are the classes, the
// other ld - cols are padding the loss never reads (a GEMM-friendly row
// width).
func CrossEntropyLD[T Float](loss []T, logits []T, targets []int32, rows, cols, ld int, ignore int32) (count int, err error) {
	checkLD("CrossEntropy", cols, ld)
	checkRows("CrossEntropy", rows, ld, len(logits))
	mustEq("CrossEntropy", "loss", len(loss), rows)
	mustEq("CrossEntropy", "targets", len(targets), rows)
	if err := checkTargets("CrossEntropy", targets, cols, ignore); err != nil {
		return 0, err
	}
	for _, t := range targets {
		if t != ignore {
			count++
		}
	}
	if serial(rows*cols, grainRow) {
		crossEntropyRows(loss, logits, targets, cols, ld, ignore, 0, rows)
		return count, nil
	}
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) { crossEntropyRows(loss, logits, targets, cols, ld, ignore, lo, hi) })
	return count, nil
}

// checkLD panics unless 0 <= cols <= ld.
func checkLD(kernel string, cols, ld int) {
	if cols < 0 || ld < cols {
		panic(fmt.Sprintf("cpukern.%s: %d classes in rows of %d elements", kernel, cols, ld))
	}
}

func crossEntropyRows[T Float](loss, logits []T, targets []int32, cols, ld int, ignore int32, lo, hi int) {
	for r := lo; r < hi; r++ {
		t := targets[r]
		if t == ignore {
			loss[r] = 0
			continue
		}
		x := logits[r*ld : r*ld+cols]
		m := rowMax(x)
		// (m - x[t]) + log s, not (m + log s) - x[t]: the latter loses
		// log s once |m| passes about 1e15 (float64's 53 bits).
		ls := math.Log(sumExpShift(x, m))
		loss[r] = T((float64(m) - float64(x[t])) + ls)
	}
}

// CrossEntropyBackward sets dlogits[r] = (softmax(logits[r]) -
// onehot(targets[r])) * dloss[r], and zeros for ignored rows. It recomputes
// the softmax from the logits rather than keeping the (rows, cols)
// probabilities alive between passes. dlogits may be logits itself. It
// panics on mismatched lengths; a target CrossEntropy would reject returns
// the same error (wrapping ErrIndex), with dlogits untouched.
func CrossEntropyBackward[T Float](dlogits, logits []T, targets []int32, dloss []T, rows, cols int, ignore int32) error {
	return CrossEntropyBackwardLD(dlogits, logits, targets, dloss, rows, cols, cols, ignore)
}

// CrossEntropyBackwardLD is CrossEntropyBackward over rows ld elements
// apart (see CrossEntropyLD); the padding of every row of dlogits is set
// to zero.
func CrossEntropyBackwardLD[T Float](dlogits, logits []T, targets []int32, dloss []T, rows, cols, ld int, ignore int32) error {
	checkLD("CrossEntropyBackward", cols, ld)
	checkRows("CrossEntropyBackward", rows, ld, len(dlogits), len(logits))
	mustEq("CrossEntropyBackward", "targets", len(targets), rows)
	mustEq("CrossEntropyBackward", "dloss", len(dloss), rows)
	if err := checkTargets("CrossEntropyBackward", targets, cols, ignore); err != nil {
		return err
	}
	if serial(rows*cols, grainRow) {
		crossEntropyBackwardRows(dlogits, logits, targets, dloss, cols, ld, ignore, 0, rows)
		return nil
	}
	ParallelFor(rows, rowGrain(cols), func(lo, hi int) {
		crossEntropyBackwardRows(dlogits, logits, targets, dloss, cols, ld, ignore, lo, hi)
	})
	return nil
}

func crossEntropyBackwardRows[T Float](dlogits, logits []T, targets []int32, dloss []T, cols, ld int, ignore int32, lo, hi int) {
	for r := lo; r < hi; r++ {
		row := dlogits[r*ld : (r+1)*ld]
		d := row[:cols]
		clear(row[cols:])
		t := targets[r]
		if t == ignore {
			clear(d)
			continue
		}
		x := logits[r*ld : r*ld+cols]
		sum := expShift(d, x, rowMax(x))
		g := float64(dloss[r])
		scale := T(g / sum)
		for i := range d {
			d[i] *= scale
		}
		d[t] -= T(g)
	}
}
