package nn_test

import (
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/tensor"
)

func autogradParam(t *tensor.Tensor) *autograd.Var { return autograd.Param(t, "p") }
