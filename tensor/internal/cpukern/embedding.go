package cpukern

import (
	"fmt"
	"runtime"
)

// checkIDs returns an error naming the first id outside [0, rows).
func checkIDs(kernel string, ids []int32, rows int) error {
	for i, id := range ids {
		if id < 0 || int(id) >= rows {
			return fmt.Errorf("%w: cpukern.%s: ids[%d] = %d, table has %d rows", ErrIndex, kernel, i, id, rows)
		}
	}
	return nil
}

func checkTable(kernel, tableArg, outArg string, table, out, ids, dim, rows int) {
	if dim < 0 || rows < 0 {
		panic(fmt.Sprintf("cpukern.%s: negative size (dim %d, rows %d)", kernel, dim, rows))
	}
	mustEq(kernel, tableArg, table, rows*dim)
	mustEq(kernel, outArg, out, ids*dim)
}

// Gather copies table row ids[i] to dst[i*dim:(i+1)*dim] (an embedding
// lookup). table holds rows rows of dim elements. Every id is checked
// before anything is written: an id outside [0, rows) returns an error
// wrapping ErrIndex that names its position and value, dst untouched.
// Mismatched lengths panic.
func Gather[T any](dst, table []T, ids []int32, dim, rows int) error {
	checkTable("Gather", "table", "dst", len(table), len(dst), len(ids), dim, rows)
	if err := checkIDs("Gather", ids, rows); err != nil {
		return err
	}
	if dim == 0 {
		return nil
	}
	if serial(len(dst), grainMem) {
		gatherRange(dst, table, ids, dim, 0, len(ids))
		return nil
	}
	ParallelFor(len(ids), max(1, grainMem/dim), func(lo, hi int) { gatherRange(dst, table, ids, dim, lo, hi) })
	return nil
}

func gatherRange[T any](dst, table []T, ids []int32, dim, lo, hi int) {
	for i := lo; i < hi; i++ {
		id := int(ids[i])
		copy(dst[i*dim:(i+1)*dim], table[id*dim:(id+1)*dim])
	}
}

// ScatterAdd adds dout[i*dim:(i+1)*dim] into row ids[i] of dtable (the
// embedding backward). Ids are validated first, as in Gather, and nothing
// is written on error. In parallel, each worker owns a range of table
// rows and scans all ids for its own, so no two workers touch one row and
// every row receives its contributions in increasing i: the result equals
// the serial one bit for bit, whatever the worker count.
func ScatterAdd[T Float](dtable, dout []T, ids []int32, dim, rows int) error {
	checkTable("ScatterAdd", "dtable", "dout", len(dtable), len(dout), len(ids), dim, rows)
	if err := checkIDs("ScatterAdd", ids, rows); err != nil {
		return err
	}
	if dim == 0 {
		return nil
	}
	if serial(len(dout), grainMem) || rows < 2 {
		scatterRange(dtable, dout, ids, dim, 0, rows)
		return nil
	}
	ParallelFor(rows, max(1, rows/runtime.GOMAXPROCS(0)), func(lo, hi int) { scatterRange(dtable, dout, ids, dim, lo, hi) })
	return nil
}

// scatterRange adds the contributions whose id lies in [lo, hi).
func scatterRange[T Float](dtable, dout []T, ids []int32, dim, lo, hi int) {
	for i, id := range ids {
		if int(id) < lo || int(id) >= hi {
			continue
		}
		d := dtable[int(id)*dim : (int(id)+1)*dim]
		s := dout[i*dim : (i+1)*dim]
		s = s[:len(d)]
		for j, v := range s {
			d[j] += v
		}
	}
}
