package dist

import (
	"fmt"
	"slices"

	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// DefaultBucketBytes is the bucket size when Options.BucketBytes is 0:
// 25 MiB, PyTorch DDP's bucket_cap_mb default.
const DefaultBucketBytes = 25 << 20

// Bucket is a group of parameters whose gradients are reduced together,
// through one contiguous buffer of Numel elements of DType: parameter i
// occupies elements [Offsets[i], Offsets[i]+Params[i].Numel()).
type Bucket struct {
	Params  []*nn.Parameter
	Offsets []int
	Numel   int
	DType   tensor.DType
}

// Bytes is the size of the bucket's gradients.
func (b Bucket) Bytes() int64 { return int64(b.Numel) * int64(b.DType.Size()) }

// AssignBuckets groups ps into buckets as PyTorch DDP does: in reverse
// order of ps (the order of registration, which a model's Parameters
// method returns, reversed: roughly the order in which backward produces
// the gradients, so the first bucket is complete first), filling each
// bucket until the next parameter would take it past bucketBytes. A
// bucket holds one dtype (a parameter of another dtype starts a new one).
// Every bucket is at most bucketBytes, except a parameter larger than
// bucketBytes, which gets a bucket of its own. bucketBytes <= 0 means
// DefaultBucketBytes. Parameters that do not require gradients are left
// out (frozen weights are not reduced). A nil parameter (or one without a
// value) panics with a *tensor.OpError wrapping tensor.ErrArgument that
// names its index (tensor.Try returns it), as an op's bad argument does;
// New returns that error instead.
func AssignBuckets(ps []*nn.Parameter, bucketBytes int64) []Bucket {
	if i := firstNil(ps); i >= 0 {
		panic(&tensor.OpError{Op: "dist.AssignBuckets", Msg: fmt.Sprintf("parameter %d is nil", i), Err: tensor.ErrArgument})
	}
	return assignBuckets(ps, bucketBytes, false)
}

// firstNil is the index of ps's first nil parameter (or one without a
// value), -1 when there is none.
func firstNil(ps []*nn.Parameter) int {
	return slices.IndexFunc(ps, func(p *nn.Parameter) bool { return p == nil || p.Var == nil || p.Value == nil })
}

// bucketSize is the bucket size asked for as n bytes: n, or
// DefaultBucketBytes for n <= 0.
func bucketSize(n int64) int64 {
	if n <= 0 {
		return DefaultBucketBytes
	}
	return n
}

// assignBuckets is AssignBuckets, with frozen parameters too when all.
func assignBuckets(ps []*nn.Parameter, bucketBytes int64, all bool) []Bucket {
	bucketBytes = bucketSize(bucketBytes)
	var bs []Bucket
	var cur Bucket
	flush := func() {
		if len(cur.Params) > 0 {
			bs = append(bs, cur)
		}
		cur = Bucket{}
	}
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		if !all && !p.RequiresGrad() {
			continue
		}
		dt, n := p.Value.DType(), p.Value.Numel()
		size := int64(n) * int64(dt.Size())
		if len(cur.Params) > 0 && (dt != cur.DType || cur.Bytes()+size > bucketBytes) {
			flush()
		}
		cur.DType = dt
		cur.Params = append(cur.Params, p)
		cur.Offsets = append(cur.Offsets, cur.Numel)
		cur.Numel += n
	}
	flush()
	return bs
}
