package checkpoint_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/checkpoint"
	"github.com/strata-ml/strata/tensor"
)

// requireOpError asserts err is an *tensor.OpError of op wrapping
// tensor.ErrArgument whose message contains want.
func requireOpError(t *testing.T, err error, op, want string) {
	t.Helper()
	require.ErrorIs(t, err, tensor.ErrArgument)
	var oe *tensor.OpError
	require.True(t, errors.As(err, &oe), "%v", err)
	require.Equal(t, op, oe.Op)
	require.ErrorContains(t, err, want)
}

// A nil function or layer is an argument error naming it, before anything
// runs: not a nil dereference.
func TestNilArguments(t *testing.T) {
	v := tensor.FromFloat32s(tensor.CPU(), []float32{1, 2}, 2)
	tensor.Keep(v)
	defer v.Release()
	x := autograd.Param(v, "x")
	requireOpError(t, tensor.Try(func() { checkpoint.Apply(nil, x) }), "checkpoint.Apply", "nil Func")
	requireOpError(t, tensor.Try(func() { checkpoint.Options{}.Apply(nil) }), "checkpoint.Apply", "nil Func")
	ran := 0
	double := func(x *autograd.Var) *autograd.Var { ran++; return autograd.Add(x, x) }
	requireOpError(t, tensor.Try(func() { checkpoint.Sequential(1, x, nil) }), "checkpoint.Sequential", "layer 0 is nil")
	requireOpError(t, tensor.Try(func() { checkpoint.Sequential(2, x, double, double, nil) }), "checkpoint.Sequential", "layer 2 is nil")
	requireOpError(t, tensor.Try(func() { checkpoint.Sequential(0, x, double, nil) }), "checkpoint.Sequential", "layer 1 is nil")
	require.Zero(t, ran, "a layer ran before the nil one was found")
}
