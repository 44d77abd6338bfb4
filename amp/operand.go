package amp

import "github.com/strata-ml/strata/tensor"

// Cast returns x in dtype dt for a low-precision matrix product: x itself
// (a new view) when it has dt already; when c's autocast region runs in
// dt and x is a float32 kept tensor (a weight, shared by every use), the
// region's copy, cast at its first use and released when the region
// closes (or, once x is released, as the cache grows), and made again if
// x is written in place in the meantime (an update, a refilled buffer:
// x.Version moved on); else a fresh cast. The
// result belongs to c; the caller releases it or leaves it to c's scope. Autograd's products use it, in
// the forward inside a region and in backward, outside any region, with
// the dtype their forward ran in. A nil c means tensor.Background(); a
// nil x panics with an *tensor.OpError wrapping tensor.ErrArgument.
func Cast(c *tensor.Ctx, x *tensor.Tensor, dt tensor.DType) *tensor.Tensor {
	if x == nil {
		panic(&tensor.OpError{Op: "amp.Cast", Msg: "nil tensor x", Err: tensor.ErrArgument})
	}
	if c == nil {
		c = tensor.Background()
	}
	if x.DType() == dt {
		return c.Adopt(x.Alias())
	}
	// Only kept tensors are cached: an orphan (a view of a weight made
	// afresh at each use, x.T() say) would leave a copy a call in the
	// region, and a released tensor would get the copy of its old
	// values where x.To fails with ErrReleased.
	if r := current(c); r != nil && r.Enabled && r.DType == dt && x.DType() == tensor.Float32 && x.Kept() && !x.Released() {
		return c.Adopt(r.weight(x).Alias())
	}
	return c.Adopt(x.To(dt))
}

// weight is the region's copy of the kept tensor x in its dtype, made at
// the first call, and made again when x has been written in place since
// (its Version moved on: an optimizer's update inside the region, an
// input buffer refilled for the next batch), so that no product reads
// values x no longer holds. The stale copy is released (tensors that
// saved it for backward keep their own references).
func (r *region) weight(x *tensor.Tensor) *tensor.Tensor {
	v := x.Version()
	if e, ok := r.cache[x]; ok {
		if e.version == v {
			return e.copy
		}
		e.copy.Release()
		delete(r.cache, x)
	}
	w := x.To(r.DType)
	tensor.Keep(w)
	if r.cache == nil {
		r.cache = map[*tensor.Tensor]cast{}
	}
	if len(r.cache) >= r.sweepAt {
		r.sweep()
	}
	r.cache[x] = cast{copy: w, version: v}
	return w
}

// sweep releases the copies of the tensors released since they were
// cast, which no Cast hands out again (a released x is cast afresh, to
// fail): a kept tensor made and freed at each step of a loop inside one
// region (a new input buffer for each batch) would otherwise leave a copy
// a step until the region closes. The cache may then double before the
// next sweep, so that sweeping costs O(1) a cast.
func (r *region) sweep() {
	for x, e := range r.cache {
		if x.Released() {
			e.copy.Release()
			delete(r.cache, x)
		}
	}
	r.sweepAt = max(2*len(r.cache), 16)
}

// cast is a region's copy of a kept tensor and the tensor's Version it
// was made at.
type cast struct {
	copy    *tensor.Tensor
	version uint64
}
