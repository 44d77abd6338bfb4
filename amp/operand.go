package amp

import "github.com/strata-ml/strata/tensor"

// Operand returns the tensor a matrix product in x's context should
// multiply for x, and the product's mode. Inside an autocast region a
// float32 x becomes a copy in the region's dtype: for a kept tensor (a
// weight, shared by every use) the region's cached copy, cast once; for
// anything else a fresh cast. Outside a region, or for other dtypes, it
// is x itself (as a new view). The result belongs to c; the caller
// releases it or leaves it to c's scope. The mode asks for float32
// products (tensor.MatMulMode.Float32Out) and carries the TF32 setting.
//
// This is how autograd's products (MatMul, Linear, GeluLinear, the
// attention's two products) follow the autocast policy.
func Operand(c *tensor.Ctx, x *tensor.Tensor) (*tensor.Tensor, tensor.MatMulMode) {
	if c == nil {
		c = tensor.Background()
	}
	r := current(c)
	if r == nil {
		return c.Adopt(x.Alias()), tensor.MatMulMode{}
	}
	mode := tensor.MatMulMode{Float32Out: true, TF32: r.TF32}
	if !r.Enabled || x.DType() != tensor.Float32 {
		return c.Adopt(x.Alias()), mode
	}
	if x.Ctx() != nil {
		return c.Adopt(x.To(r.DType)), mode
	}
	w, ok := r.cache[x]
	if !ok {
		w = x.To(r.DType)
		tensor.Keep(w)
		if r.cache == nil {
			r.cache = map[*tensor.Tensor]*tensor.Tensor{}
		}
		r.cache[x] = w
	}
	return c.Adopt(w.Alias()), mode
}

// Cast returns x in dtype dt for a low-precision product: x itself (a new
// view) when it has dt already; the open region's cached copy when x is
// a kept tensor (a weight) and c's autocast region runs in dt; else a
// fresh cast. The result belongs to c. Autograd's backward products use
// it with the dtype their forward ran in, outside any region.
func Cast(c *tensor.Ctx, x *tensor.Tensor, dt tensor.DType) *tensor.Tensor {
	if c == nil {
		c = tensor.Background()
	}
	if x.DType() == dt {
		return c.Adopt(x.Alias())
	}
	if r := current(c); r != nil && r.Enabled && r.DType == dt && x.DType() == tensor.Float32 {
		o, _ := Operand(c, x)
		return o
	}
	return c.Adopt(x.To(dt))
}
