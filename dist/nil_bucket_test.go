package dist_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// TestAssignBucketsNilParameter: a nil parameter is an error naming its
// index (a *tensor.OpError wrapping tensor.ErrArgument, as an op's bad
// argument panics with), not a nil dereference.
func TestAssignBucketsNilParameter(t *testing.T) {
	for _, ps := range [][]*nn.Parameter{
		{param(t, "a", tensor.Float32, 4), nil},
		{param(t, "a", tensor.Float32, 4), {Name: "b"}},
	} {
		err := tensor.Try(func() { dist.AssignBuckets(ps, 0) })
		require.ErrorIs(t, err, tensor.ErrArgument)
		var oe *tensor.OpError
		require.ErrorAs(t, err, &oe)
		assert.ErrorContains(t, err, "dist.AssignBuckets: parameter 1 is nil")
	}
}
