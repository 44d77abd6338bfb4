package nn

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-ml/strata/tensor"
)

// A training state file is what a run needs to continue exactly where it
// stopped: the parameters under their names (as SaveWeights writes them),
// AdamW's moments under PyTorch's state names, and string metadata (the
// optimizer's step and settings, and whatever the caller adds: the step of
// the run, the random generators, the gradient scaler). It is a plain
// safetensors file: safetensors.torch.load_file reads it.
const (
	// ExpAvgPrefix and ExpAvgSqPrefix name a parameter's first and second
	// AdamW moments in a training state file ("optimizer.exp_avg.<name>").
	ExpAvgPrefix   = "optimizer.exp_avg."
	ExpAvgSqPrefix = "optimizer.exp_avg_sq."
	// OptimizerStepKey is the metadata entry with AdamW's step count.
	OptimizerStepKey = "optimizer.step"
	// ParamStepPrefix names the metadata entry with a parameter's own
	// update count ("optimizer.step.<name>"), written for the parameters
	// with moments whose count differs from OptimizerStepKey's.
	ParamStepPrefix = OptimizerStepKey + "."
)

// SaveTrainState writes ps and opt's state to path, atomically (see
// tensor.WriteSafetensorsContext: a cancelled ctx leaves the old file),
// with meta added to the metadata. The key "optimizer" (the optimizer's
// name, which LoadTrainState checks) and keys starting with "optimizer."
// are reserved: a meta entry of one is an error. opt's Params must be among ps (an optimizer over a subset,
// with the others frozen, is fine; one built over another model's
// parameters is an error wrapping tensor.ErrArgument).
func SaveTrainState(ctx context.Context, path string, ps []*Parameter, opt *AdamW, meta map[string]string) error {
	if ctx == nil {
		return fmt.Errorf("nn: saving %s: nil context (context.Background() for none): %w", path, tensor.ErrArgument)
	}
	if err := sameParams(ps, opt); err != nil {
		return fmt.Errorf("nn: saving %s: %w", path, err)
	}
	byName, err := ByName(ps)
	if err != nil {
		return fmt.Errorf("nn: saving %s: %w", path, err)
	}
	ts := make(map[string]*tensor.Tensor, 3*len(byName))
	for name, p := range byName {
		ts[name] = p.Value
		if m, ok := opt.m[p]; ok {
			ts[ExpAvgPrefix+name], ts[ExpAvgSqPrefix+name] = m, opt.v[p]
		}
	}
	steps := map[string]string{}
	for name, p := range byName {
		if _, ok := opt.m[p]; ok && opt.steps[p] != opt.step {
			steps[ParamStepPrefix+name] = strconv.Itoa(opt.steps[p])
		}
	}
	md := map[string]string{"format": "pt"}
	for k, v := range meta {
		if k == "optimizer" || strings.HasPrefix(k, "optimizer.") {
			return fmt.Errorf("nn: saving %s: metadata key %q is reserved", path, k)
		}
		md[k] = v
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	md["optimizer"] = "AdamW"
	md[OptimizerStepKey] = strconv.Itoa(opt.step)
	maps.Copy(md, steps)
	md["optimizer.lr"], md["optimizer.betas"] = f(opt.LR), f(opt.Beta1)+","+f(opt.Beta2)
	md["optimizer.eps"], md["optimizer.weight_decay"] = f(opt.Eps), f(opt.WeightDecay)
	return tensor.WriteSafetensorsContext(ctx, path, ts, md)
}

// LoadTrainState reads a file SaveTrainState wrote into ps and opt: every
// parameter must be there with its shape, each parameter's moments both or
// neither, and nothing else (strict, like LoadWeights). It restores opt's
// step, moments and each parameter's update count (the step, unless the
// file has one of its own under ParamStepPrefix, which must not pass the
// step: AdamW's counts never do); opt's learning rate, betas, eps and
// weight decay are left as the caller set them (the metadata has the
// saved ones). opt's Params must be among ps (as for SaveTrainState), the
// weights floats, finite in their parameter's dtype (as LoadWeights
// requires), and the moments floats, finite, exp_avg_sq's entries >= 0 (a step
// from a negative one makes the weights NaN): any of these is an error
// wrapping tensor.ErrArgument. Names or shapes that are not the
// parameters' (a state of another model) are an error wrapping
// tensor.ErrShape, as LoadWeights' are. On error ps and opt are
// unchanged.
//
// The file is read into host memory, and its tensors go to their
// parameters' devices through a staging buffer of at most 16 MiB per
// device and dtype (memory.RoleStaging), a chunk at a time: besides
// the new moments of a parameter that had none, a device holds about one
// tensor more than its state while the file loads, not the state twice.
// Where the host cannot write the staging memory (a policy that puts
// RoleStaging in device memory), that device's tensors are uploaded whole
// before anything changes, as the all-or-nothing promise above needs.
func LoadTrainState(path string, ps []*Parameter, opt *AdamW) (meta map[string]string, err error) {
	if err := sameParams(ps, opt); err != nil {
		return nil, fmt.Errorf("nn: loading %s: %w", path, err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("nn: loading %s: no parameters to load into", path)
	}
	byName, err := ByName(ps) // before the file is read
	if err != nil {
		return nil, fmt.Errorf("nn: loading %s: %w", path, err)
	}
	files, meta, err := readFileTensors(path)
	if err != nil {
		return nil, err
	}
	c := tensor.NewCtx()
	if e := tensor.Try(func() {
		c.WithScope(func() { meta, err = loadTrainState(c, path, byName, opt, files, meta) })
	}); e != nil {
		return nil, fmt.Errorf("nn: loading %s: %w", path, e)
	}
	return meta, err
}

// loadTrainState checks everything the file holds before it changes ps
// or opt, then copies it in a chunk at a time (stager). It runs in a
// scope of c: the checks' temporaries and the views are released with it.
func loadTrainState(c *tensor.Ctx, path string, byName map[string]*Parameter, opt *AdamW, files map[string]fileTensor, meta map[string]string) (map[string]string, error) {
	if meta["optimizer"] != "AdamW" {
		return nil, fmt.Errorf("nn: loading %s: not a training state file (metadata optimizer = %q, want AdamW)", path, meta["optimizer"])
	}
	step, err := strconv.Atoi(meta[OptimizerStepKey])
	if err != nil || step < 0 {
		return nil, fmt.Errorf("nn: loading %s: metadata %s = %q: want a non-negative integer", path, OptimizerStepKey, meta[OptimizerStepKey])
	}
	var missing, unexpected []string
	moments := map[*Parameter][2]string{} // the moments' names in the file
	for name, f := range files {
		base, kind := name, 0
		if s, ok := strings.CutPrefix(name, ExpAvgPrefix); ok {
			base, kind = s, 1
		} else if s, ok := strings.CutPrefix(name, ExpAvgSqPrefix); ok {
			base, kind = s, 2
		}
		p, ok := byName[base]
		if !ok {
			unexpected = append(unexpected, name)
			continue
		}
		if !slices.Equal(f.shape, p.Value.Shape()) {
			return nil, &mismatchError{fmt.Sprintf("nn: loading %s: %q has shape %v in the file, the model wants %v", path, name, f.shape, p.Value.Shape())}
		}
		if kind > 0 {
			mv := moments[p]
			mv[kind-1] = name
			moments[p] = mv
		}
	}
	for name, p := range byName {
		if _, ok := files[name]; !ok {
			missing = append(missing, name)
		}
		if mv, ok := moments[p]; ok && (mv[0] == "") != (mv[1] == "") {
			return nil, &mismatchError{fmt.Sprintf("nn: loading %s: %q has one AdamW moment but not the other", path, name)}
		}
	}
	// Where each tensor goes: a parameter's weights to its device, its
	// moments to its state's (in whatever tier the placement scheduler
	// left it: a staging buffer serves a device, all its tiers) or, for
	// a parameter without, to its own, where newMoments allocates them.
	stage := newStager(c, "nn.LoadTrainState")
	defer stage.release()
	for name, p := range byName {
		if !p.Value.IsContiguous() || (opt.m[p] != nil && !opt.m[p].IsContiguous()) {
			// A copy into a strided view of it would be lost.
			return nil, fmt.Errorf("nn: loading %s: %q or its optimizer state is not contiguous: %w", path, name, tensor.ErrArgument)
		}
		if f, ok := files[name]; ok {
			stage.plan(p.Value.Device(), f)
		}
		if mv, ok := moments[p]; ok {
			dev := momentDevice(opt, p)
			stage.plan(dev, files[mv[0]])
			stage.plan(dev, files[mv[1]])
		}
	}
	if err := stage.allocate(); err != nil {
		return nil, fmt.Errorf("nn: loading %s: %w", path, err)
	}
	for name, p := range byName {
		if f, ok := files[name]; ok {
			if err := checkWeights(stage, name, p.Value.Device(), f, p.Value.DType()); err != nil {
				return nil, fmt.Errorf("nn: loading %s: %w", path, err)
			}
		}
		if mv, ok := moments[p]; ok {
			dev := momentDevice(opt, p)
			for i, key := range mv {
				if err := checkMoment(stage, key, i == 1, dev, files[key], p.Value.DType()); err != nil {
					return nil, fmt.Errorf("nn: loading %s: %w", path, err)
				}
			}
		}
	}
	steps, err := paramSteps(byName, moments, meta, step)
	if err != nil {
		return nil, fmt.Errorf("nn: loading %s: %w", path, err)
	}
	if len(missing) > 0 || len(unexpected) > 0 {
		slices.Sort(missing)
		slices.Sort(unexpected)
		return nil, &mismatchError{fmt.Sprintf("nn: loading %s: missing %v, unexpected %v", path, missing, unexpected)}
	}
	// Everything checked, and the staging buffers allocated: a copy
	// from one into its device's tensor allocates nothing (it converts
	// the dtype as it copies). The moments are allocated before anything
	// changes (a parameter's own are reused), so that running out of
	// memory for them leaves the model and the optimizer as they were.
	state := make(map[*Parameter][2]*tensor.Tensor, len(moments))
	done := false
	defer func() {
		if !done { // an allocation failed (a panic): free the new moments
			for p, mv := range state {
				if opt.m[p] != mv[0] {
					mv[0].Release()
					mv[1].Release()
				}
			}
		}
	}()
	for p := range moments {
		if m, ok := opt.m[p]; ok {
			state[p] = [2]*tensor.Tensor{m, opt.v[p]}
			continue
		}
		m, v := newMoments(p)
		state[p] = [2]*tensor.Tensor{m, v}
	}
	done = true
	// Now change the model and the optimizer.
	for name, p := range byName {
		stage.copyInto(p.Value, name, files[name])
	}
	for p, mv := range moments {
		stage.copyInto(state[p][0], mv[0], files[mv[0]])
		stage.copyInto(state[p][1], mv[1], files[mv[1]])
	}
	for p, m := range opt.m {
		if _, ok := state[p]; !ok { // no moments in the file: a fresh start
			m.Release()
			opt.v[p].Release()
		}
	}
	opt.m, opt.v = make(map[*Parameter]*tensor.Tensor, len(state)), make(map[*Parameter]*tensor.Tensor, len(state))
	for p, mv := range state {
		opt.m[p], opt.v[p] = mv[0], mv[1]
	}
	opt.steps, opt.step = steps, step
	return meta, nil
}

// momentDevice is the device p's moments are loaded onto: that of its
// state, or p's for a parameter without (newMoments allocates them there).
func momentDevice(opt *AdamW, p *Parameter) tensor.Device {
	if m, ok := opt.m[p]; ok {
		return m.Device()
	}
	return p.Value.Device()
}

// sameParams refuses an optimizer with a parameter that is not among ps
// (an optimizer built over another model): its state would be saved or
// loaded for parameters it does not update. An optimizer over a subset
// of ps (the others frozen) is accepted.
func sameParams(ps []*Parameter, opt *AdamW) error {
	if opt == nil {
		return fmt.Errorf("nil optimizer: %w", tensor.ErrArgument)
	}
	in := make(map[*Parameter]bool, len(ps))
	for i, p := range ps {
		if err := notNil(i, p); err != nil {
			return err
		}
		in[p] = true
	}
	for i, p := range opt.Params {
		if err := notNil(i, p); err != nil {
			return fmt.Errorf("the optimizer's %w", err)
		}
		if !in[p] {
			return fmt.Errorf("the optimizer's parameter %q is not among the %d parameters given (an optimizer built over another model?): %w", p.Name, len(ps), tensor.ErrArgument)
		}
	}
	return nil
}

// checkWeights refuses, as LoadWeights does, a parameter's weights f
// (in the file) of a dtype that is not a float and with values that are
// not finite in the parameter's dtype dt (a NaN or an infinity in the
// file, or a value past dt's range): such weights load, then fail at the
// first step with a loss of NaN that blames the learning rate or the
// data. The values are checked on dev, the parameter's device, a chunk
// at a time (stager).
func checkWeights(s *stager, name string, dev tensor.Device, f fileTensor, dt tensor.DType) error {
	if !f.dt.IsFloat() {
		return fmt.Errorf("%q: dtype %v: want a float: %w", name, f.dt, tensor.ErrArgument)
	}
	finite := true
	s.each(dev, name, f, func(t *tensor.Tensor, _ int) bool {
		if t.DType() != dt {
			t = t.To(dt) // in the chunk's scope, as t is
		}
		finite = tensor.AllFinite(t)
		return finite
	})
	if !finite {
		return fmt.Errorf("%q has an entry that is NaN or infinite in %v: the weights are not finite: %w", name, dt, tensor.ErrArgument)
	}
	return nil
}

// checkMoment refuses a parameter's moment f (in the file, under key;
// exp_avg_sq when sq) that a step would turn into NaN weights: an entry
// of exp_avg that is not finite, or one of exp_avg_sq that is not finite
// or is negative, in the dtype dt of the parameter and its optimizer
// state, and a moment that is not a float (the copy into the state would
// convert integers, as checkWeights refuses for the weights). The moment
// of a parameter of no elements has no entry to check. It is checked on
// dev, a chunk at a time (stager).
func checkMoment(s *stager, key string, sq bool, dev tensor.Device, f fileTensor, dt tensor.DType) error {
	if !f.dt.IsFloat() {
		return fmt.Errorf("%q: dtype %v: want a float: %w", key, f.dt, tensor.ErrArgument)
	}
	var err error
	s.each(dev, key, f, func(t *tensor.Tensor, _ int) bool {
		if t.DType() != dt {
			t = t.To(dt) // as the copy into the state (of dt) converts it: past dt's range, infinite
		}
		if t.DType() != tensor.Float32 && t.DType() != tensor.Float64 {
			t = t.To(tensor.Float32)
		}
		hi, lo := tensor.Max(t, false).Item(), -tensor.Max(tensor.Neg(t), false).Item()
		ss := tensor.SumSquares(t)
		switch {
		case math.IsNaN(ss) || math.IsNaN(hi) || math.IsNaN(lo) || math.IsInf(hi, 0) || math.IsInf(lo, 0):
			err = fmt.Errorf("%q has an entry that is NaN or infinite: %w", key, tensor.ErrArgument)
		case sq && lo < 0:
			err = fmt.Errorf("%q has a negative entry (%v): a second moment is >= 0: %w", key, lo, tensor.ErrArgument)
		}
		return err == nil
	})
	return err
}

// paramSteps is the update count of each parameter with moments: its
// ParamStepPrefix entry in meta, or step. An entry for a parameter
// without moments, or one that is not a non-negative integer up to step,
// is an error.
func paramSteps(byName map[string]*Parameter, moments map[*Parameter][2]string, meta map[string]string, step int) (map[*Parameter]int, error) {
	steps := make(map[*Parameter]int, len(moments))
	for p := range moments {
		steps[p] = step
	}
	for k, v := range meta {
		name, ok := strings.CutPrefix(k, ParamStepPrefix)
		if !ok {
			continue
		}
		p := byName[name]
		if _, has := moments[p]; !has {
			return nil, fmt.Errorf("metadata %s: no parameter %q with AdamW moments", k, name)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("metadata %s = %q: want a non-negative integer", k, v)
		}
		if n > step {
			// AdamW keeps every count within its step (Step's doc), and
			// SaveTrainState writes none past it.
			return nil, fmt.Errorf("metadata %s = %d: more updates than the optimizer's step %d: %w", k, n, step, tensor.ErrArgument)
		}
		steps[p] = n
	}
	return steps, nil
}

// NonFinite returns the name of the first parameter holding a NaN or an
// infinity, or "" when all are finite: a check before weights are saved
// over good ones. A nil entry in ps is an error wrapping
// tensor.ErrArgument.
func NonFinite(ps []*Parameter) (string, error) {
	for i, p := range ps {
		if err := notNil(i, p); err != nil {
			return "", fmt.Errorf("nn: NonFinite: %w", err)
		}
	}
	var bad string
	err := tensor.Try(func() {
		for _, p := range ps {
			if !tensor.AllFinite(p.Value) {
				bad = p.Name
				return
			}
		}
	})
	return bad, err
}
