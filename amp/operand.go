package amp

import "github.com/strata-ml/strata/tensor"

// Cast returns x in dtype dt for a low-precision matrix product: x itself
// (a new view) when it has dt already; when c's autocast region runs in
// dt and x is a float32 kept tensor (a weight, shared by every use), the
// region's copy, cast at its first use and released when the region
// closes; else a fresh cast. The result belongs to c; the caller
// releases it or leaves it to c's scope. Autograd's products use it, in
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
	if r := current(c); r != nil && r.Enabled && r.DType == dt && x.DType() == tensor.Float32 && x.Ctx() == nil {
		return c.Adopt(r.weight(x).Alias())
	}
	return c.Adopt(x.To(dt))
}

// weight is the region's copy of the kept tensor x in its dtype, made at
// the first call.
func (r *region) weight(x *tensor.Tensor) *tensor.Tensor {
	w, ok := r.cache[x]
	if !ok {
		w = x.To(r.DType)
		tensor.Keep(w)
		if r.cache == nil {
			r.cache = map[*tensor.Tensor]*tensor.Tensor{}
		}
		r.cache[x] = w
	}
	return w
}
