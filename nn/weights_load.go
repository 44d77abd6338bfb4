package nn

import (
	"fmt"

	"github.com/strata-ml/strata/tensor"
)

// loadSteps copies the file's tensors planLoad matched into ps through a
// staging buffer per device and dtype (stager), a chunk at a time, where
// making each tensor on its device first held the weights there twice.
// It checks first, changing nothing: the values a narrower dtype would
// make infinite (1e6 in float16; planLoad refused those infinite in the
// file) are looked for in each converted chunk, and the staging buffers
// are allocated, so that the copies after allocate nothing and cannot
// run out of memory halfway. It runs in a scope of c, which releases
// the checks' temporaries and the views.
func loadSteps(c *tensor.Ctx, ps []*Parameter, pl []loadStep) error {
	files := make([]fileTensor, len(ps))
	stage := newStager(c, "nn.LoadWeights")
	defer stage.release()
	for i, p := range ps {
		if !p.Value.IsContiguous() {
			// copyInto writes through a flat view of it: a copy of a
			// strided one would be lost.
			return fmt.Errorf("%q is not contiguous: %w", p.Name, tensor.ErrArgument)
		}
		s := pl[i]
		files[i] = fileTensor{dt: s.dt, shape: s.shape, data: s.view.Data(), transposed: s.transposed}
		stage.plan(p.Value.Device(), files[i])
	}
	if err := stage.allocate(); err != nil {
		return err
	}
	for i, p := range ps {
		f, dt := files[i], p.Value.DType()
		if dt == f.dt {
			continue
		}
		fits := true
		stage.each(p.Value.Device(), p.Name, f, func(t *tensor.Tensor, _ int) bool {
			fits = tensor.AllFinite(t.To(dt)) // in the chunk's scope, as t is
			return fits
		})
		if !fits {
			// Refused as an infinity in the file is.
			return fmt.Errorf("%q: its %v values do not all fit the parameter's %v (some would be infinite): %w", p.Name, f.dt, dt, tensor.ErrArgument)
		}
	}
	for i, p := range ps {
		stage.copyInto(p.Value, p.Name, files[i])
	}
	return nil
}
