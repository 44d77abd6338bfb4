package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/strata-ml/strata/tensor"
)

// An OpError names tensor's own ops as tensor.Op and other packages' ops
// as they qualify them.
func TestOpErrorNamesItsPackage(t *testing.T) {
	for op, want := range map[string]string{
		"MatMul":         "tensor.MatMul: bad: invalid argument",
		"Tensor.Reshape": "tensor.Tensor.Reshape: bad: invalid argument",
		"nn.GPT.Forward": "nn.GPT.Forward: bad: invalid argument",
		"amp.With":       "amp.With: bad: invalid argument",
		"":               "tensor.: bad: invalid argument",
		".x":             "tensor..x: bad: invalid argument",
	} {
		assert.Equal(t, want, (&tensor.OpError{Op: op, Msg: "bad", Err: tensor.ErrArgument}).Error(), op)
	}
	assert.Equal(t, "autograd.Backward: invalid argument", (&tensor.OpError{Op: "autograd.Backward", Err: tensor.ErrArgument}).Error())
}
