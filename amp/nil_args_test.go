package amp_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/tensor"
)

// A nil function or tensor is an argument error naming it, not a nil
// dereference; the region's state is as it was.
func TestNilArguments(t *testing.T) {
	c := tensor.NewCtx()
	check := func(err error, op, want string) {
		t.Helper()
		require.ErrorIs(t, err, tensor.ErrArgument)
		var oe *tensor.OpError
		require.True(t, errors.As(err, &oe), "%v", err)
		require.Equal(t, op, oe.Op)
		require.ErrorContains(t, err, want)
	}
	check(tensor.Try(func() { amp.Autocast(c, tensor.BFloat16, nil) }), "amp.Autocast", "nil fn")
	check(tensor.Try(func() { amp.With(c, amp.State{}, nil) }), "amp.With", "nil fn")
	check(tensor.Try(func() { amp.Cast(c, nil, tensor.BFloat16) }), "amp.Cast", "nil tensor x")
	require.Equal(t, amp.State{}, amp.Current(c))
}
