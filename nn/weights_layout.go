package nn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	st "github.com/nlpodyssey/safetensors"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/tensor"
)

// Layout is how a GPT's weights are named and laid out in a file.
type Layout int

const (
	// LayoutAuto, the zero value: for loading, the layout is told from
	// the file's names and shapes (see LoadWeightsLayout); for saving, the
	// default layout, LayoutNanoGPT (what SaveWeights and train-gpt's
	// -out write).
	LayoutAuto Layout = iota
	// LayoutNanoGPT is the parameters' own names (nanoGPT's state_dict
	// keys, "transformer.h.0.attn.c_attn.weight") with every weight as
	// nn.Linear stores it, (out, in): what SaveWeights writes and
	// nanoGPT's GPT.load_state_dict reads.
	LayoutNanoGPT
	// LayoutHF is Hugging Face's GPT-2 (transformers' GPT2Model, the
	// model.safetensors of the hub's gpt2 checkpoints): the names without
	// "transformer." ("h.0.attn.c_attn.weight", "wte.weight"), and the four
	// projections of each block (attn.c_attn, attn.c_proj, mlp.c_fc,
	// mlp.c_proj) stored as its Conv1D stores them, (in, out): transposed
	// relative to nn.Linear. Loading also accepts the names with
	// "transformer." (GPT2LMHeadModel's state_dict).
	LayoutHF
)

func (l Layout) String() string {
	switch l {
	case LayoutAuto:
		return "auto"
	case LayoutNanoGPT:
		return "nanogpt"
	case LayoutHF:
		return "hf"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// ParseLayout maps "auto", "nanogpt" and "hf" (or "huggingface"), in any
// case, to a Layout.
func ParseLayout(s string) (Layout, error) {
	switch strings.ToLower(s) {
	case "auto":
		return LayoutAuto, nil
	case "nanogpt":
		return LayoutNanoGPT, nil
	case "hf", "huggingface":
		return LayoutHF, nil
	}
	return 0, fmt.Errorf("nn: weights layout %q: want auto, nanogpt or hf", s)
}

// conv1DSuffixes name the weights Hugging Face's GPT-2 stores as Conv1D,
// (in, out).
var conv1DSuffixes = []string{"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}

// isConv1D reports whether p is stored transposed in LayoutHF.
func isConv1D(p *Parameter) bool {
	if p.Value.Rank() != 2 {
		return false
	}
	for _, s := range conv1DSuffixes {
		if p.Name == s || strings.HasSuffix(p.Name, "."+s) {
			return true
		}
	}
	return false
}

// hfPrefix is the module nanoGPT and GPT2LMHeadModel keep the trunk in.
const hfPrefix = "transformer."

// hfName is a parameter's name in LayoutHF: without "transformer.".
func hfName(name string) string { return strings.TrimPrefix(name, hfPrefix) }

// tiedHead is the output head a file may carry beside the token table
// (GPT2LMHeadModel's, tied to it); the GPT has no parameter of its own
// for it.
const tiedHead = "lm_head.weight"

// attnBuffer matches the attention's non-parameter buffers that PyTorch
// checkpoints may hold: the causal mask ("attn.bias", nanoGPT without
// flash attention and older transformers) and "attn.masked_bias" (older
// transformers). They are skipped whatever their dtype.
var attnBuffer = regexp.MustCompile(`^(transformer\.)?h\.[0-9]+\.attn\.(bias|masked_bias)$`)

// SaveWeightsLayout writes the parameters to a safetensors file in the
// given layout (LayoutNanoGPT, and LayoutAuto with it, is
// SaveWeightsContext; LayoutHF renames and transposes, see Layout),
// atomically and durably. In LayoutHF the
// metadata gets "format": "pt" unless meta sets it, as transformers'
// from_pretrained requires; the tied head (lm_head.weight) is not
// written, as save_pretrained does not.
func SaveWeightsLayout(ctx context.Context, path string, ps []*Parameter, meta map[string]string, layout Layout) (err error) {
	if ctx == nil {
		return fmt.Errorf("nn: saving %s: nil context (context.Background() for none): %w", path, tensor.ErrArgument)
	}
	switch layout {
	case LayoutAuto, LayoutNanoGPT:
		return SaveWeightsContext(ctx, path, ps, meta)
	case LayoutHF:
	default:
		return fmt.Errorf("nn: saving %s: layout %v: want auto, nanogpt or hf", path, layout)
	}
	if _, err := ByName(ps); err != nil {
		return fmt.Errorf("nn: saving %s: %w", path, err)
	}
	m := make(map[string]*tensor.Tensor, len(ps))
	var temps []*tensor.Tensor
	defer func() {
		for _, t := range temps {
			t.Release()
		}
	}()
	if e := tensor.Try(func() {
		for _, p := range ps {
			name := hfName(p.Name)
			if _, dup := m[name]; dup {
				err = fmt.Errorf("nn: saving %s in layout hf: two parameters are named %q without %q", path, name, hfPrefix)
				return
			}
			t := p.Value
			if isConv1D(p) {
				v := p.Value.T()
				temps = append(temps, v) // before Contiguous, which may run out of memory
				t = v.Contiguous()
				temps = append(temps, t)
			}
			m[name] = t
		}
	}); e != nil {
		return fmt.Errorf("nn: saving %s: %w", path, e)
	}
	if err != nil {
		return err
	}
	md := maps.Clone(meta)
	if md == nil {
		md = map[string]string{}
	}
	if _, ok := md["format"]; !ok {
		md["format"] = "pt"
	}
	return tensor.WriteSafetensorsContext(ctx, path, m, md)
}

// LoadWeights reads a safetensors file into the parameters, converting
// float dtypes (F64, F32, F16, BF16). The layout is told from the file
// (LoadWeightsLayout with LayoutAuto): strata's and nanoGPT's files, and
// Hugging Face's GPT-2 checkpoints, load alike. Every parameter must be
// present with its exact shape; names in the file that match no parameter
// are an error too (strict, like PyTorch's load_state_dict), except the
// attention's mask buffers (h.N.attn.bias, h.N.attn.masked_bias) and a
// tied head, lm_head.weight, which must equal the token table when the
// parameters have one. Names or shapes that are not the parameters' are
// an error wrapping tensor.ErrShape (IsTrainStateFile tells a training
// state, whose moments are unexpected names), and a tensor that is not a
// float, or a NaN or an infinity in one, an error naming it, wrapping
// tensor.ErrArgument, as are finite values that the parameter's narrower
// dtype would make infinite (1e6 in float16). A file of another size
// than its header describes (cut short, or with bytes past the tensors'
// data) is refused before its data is read, naming both sizes (see
// tensor.ReadSafetensorsFile). A parameter whose values are a strided
// view is an error wrapping tensor.ErrArgument. A refused file changes
// no parameter, and neither does running out of memory while reading it.
//
// The file is read into host memory, and its tensors go to their
// parameters' devices through a staging buffer of at most 16 MiB per
// device and dtype in the file (memory.RoleStaging), a chunk at a time,
// converted and transposed (Hugging Face's Conv1D weights) as they are
// copied in: a device holds about one tensor more than its weights while
// the file loads (a staging buffer, and a chunk converted for the range
// check), not its weights twice. Where the host cannot write the staging
// memory (a policy that puts RoleStaging in device memory), that device's
// tensors are uploaded whole before anything changes, as the promise
// above needs.
func LoadWeights(path string, ps []*Parameter) (meta map[string]string, err error) {
	meta, _, err = LoadWeightsLayout(path, ps, LayoutAuto)
	return meta, err
}

// LoadWeightsLayout is LoadWeights in a given layout, or with LayoutAuto
// in the layout told from the file, which it returns. LayoutAuto decides
// by the projections' shapes: (out, in) is nn.Linear (LayoutNanoGPT),
// (in, out) Hugging Face's Conv1D (LayoutHF); by the names when no
// projection tells (names without "transformer." are Hugging Face's). A
// file that mixes the two, or Hugging Face's names with nn.Linear's
// shapes, is an error that says so.
func LoadWeightsLayout(path string, ps []*Parameter, layout Layout) (meta map[string]string, got Layout, err error) {
	fail := func(format string, args ...any) (map[string]string, Layout, error) {
		return nil, got, fmt.Errorf("nn: loading %s: "+format, append([]any{path}, args...)...)
	}
	if len(ps) == 0 {
		return fail("no parameters to load into")
	}
	if _, err := ByName(ps); err != nil {
		return fail("%w", err)
	}
	buf, err := tensor.ReadSafetensorsFile(path) // the data only when the header describes the file's size
	if errors.Is(err, atomicfile.ErrNotRegular) {
		return nil, got, fmt.Errorf("nn: loading weights: %w: %w", err, tensor.ErrArgument)
	} else if errors.Is(err, tensor.ErrArgument) {
		return fail("not a safetensors file: %w", err)
	} else if err != nil {
		return nil, got, fmt.Errorf("nn: loading weights: %w", err)
	}
	// The header is parsed once: ReadMetadata checks its length and the
	// tensors' offsets against the file, and the views are cut from the
	// data here (st.Deserialize would parse it again).
	n, md, err := st.ReadMetadata(buf)
	if err != nil {
		return fail("not a safetensors file: %w", err)
	}
	if err := tensor.CheckParsedSafetensorsHeader(path, buf[8:8+n], md); err != nil {
		return fail("%w", err)
	}
	data := buf[8+n:]
	files := make(map[string]st.TensorView, len(md.Tensors()))
	for name, info := range md.Tensors() {
		// A dimension past int (beside a 0, which the format's checks
		// pass) would read as a negative one (fileShape).
		if _, err := tensor.SafetensorsShape(info.Shape); err != nil {
			return fail("tensor %q: %w", name, err)
		}
		v, err := st.NewTensorView(info.DType, info.Shape, data[info.DataOffsets[0]:info.DataOffsets[1]])
		if err != nil {
			return fail("tensor %q: %w", name, err)
		}
		files[name] = v
	}
	prefixed := true // the file's names keep "transformer."
	switch layout {
	case LayoutAuto:
		if layout, prefixed, err = detectLayout(ps, files); err != nil {
			return fail("%w", err)
		}
	case LayoutNanoGPT:
	case LayoutHF:
		prefixed = anyPrefixed(ps, files)
	default:
		return fail("layout %v: want auto, nanogpt or hf", layout)
	}
	got = layout
	pl, err := planLoad(ps, files, layout, prefixed)
	if err != nil {
		return fail("(%v layout) %w", layout, err)
	}
	c := tensor.NewCtx()
	if e := tensor.Try(func() { c.WithScope(func() { err = loadSteps(c, ps, pl) }) }); e != nil {
		return fail("%w", e)
	}
	if err != nil {
		return fail("%w", err)
	}
	return md.Metadata(), got, nil
}

// anyPrefixed reports whether some parameter with "transformer." is in
// the file under its own name.
func anyPrefixed(ps []*Parameter, files map[string]st.TensorView) bool {
	for _, p := range ps {
		if _, ok := files[p.Name]; ok && strings.HasPrefix(p.Name, hfPrefix) {
			return true
		}
	}
	return false
}

// detectLayout tells a file's layout from its names and the shapes of
// the projections; prefixed says whether its names keep "transformer.".
func detectLayout(ps []*Parameter, files map[string]st.TensorView) (layout Layout, prefixed bool, err error) {
	var full, short []string // parameters found under their own name / HF's
	var linear, conv []string
	for _, p := range ps {
		name := p.Name
		_, okFull := files[p.Name]
		_, okShort := files[hfName(p.Name)]
		okShort = okShort && hfName(p.Name) != p.Name
		switch {
		case okFull && okShort:
			return 0, false, fmt.Errorf("cannot tell the layout: the file has both %q and %q", p.Name, hfName(p.Name))
		case okFull && strings.HasPrefix(p.Name, hfPrefix):
			full = append(full, p.Name)
		case okShort:
			short = append(short, p.Name)
			name = hfName(p.Name)
		}
		v, ok := files[name]
		if !ok || !isConv1D(p) {
			continue
		}
		s, want := fileShape(v), p.Value.Shape()
		switch {
		case slices.Equal(s, want) && want[0] != want[1]:
			linear = append(linear, name)
		case slices.Equal(s, []int{want[1], want[0]}) && want[0] != want[1]:
			conv = append(conv, name)
		}
	}
	switch {
	case len(full) > 0 && len(short) > 0:
		return 0, false, fmt.Errorf("cannot tell the layout: the file names %q with %q but %q without", full[0], hfPrefix, hfName(short[0]))
	case len(linear) > 0 && len(conv) > 0:
		return 0, false, fmt.Errorf("cannot tell the layout: %q is stored (out, in) as nn.Linear (nanoGPT) but %q (in, out) as Conv1D (Hugging Face)", linear[0], conv[0])
	case len(conv) > 0:
		return LayoutHF, len(short) == 0, nil
	case len(linear) > 0 && len(short) > 0:
		return 0, false, fmt.Errorf("cannot tell the layout: names without %q are Hugging Face's, but %q is stored (out, in) as nn.Linear, nanoGPT's way", hfPrefix, linear[0])
	case len(short) > 0:
		return LayoutHF, false, nil
	}
	return LayoutNanoGPT, true, nil
}

// loadStep is how one parameter is read from the file.
type loadStep struct {
	view       st.TensorView
	dt         tensor.DType
	shape      []int // in the file
	transposed bool  // Conv1D: the parameter is the file's tensor transposed
}

// planLoad matches every parameter with its tensor in the file, checking
// names, shapes and dtypes, before anything is copied.
func planLoad(ps []*Parameter, files map[string]st.TensorView, layout Layout, prefixed bool) ([]loadStep, error) {
	steps := make([]loadStep, len(ps))
	used := make(map[string]bool, len(ps))
	var missing []string
	var wte *Parameter
	for i, p := range ps {
		name := p.Name
		if layout == LayoutHF && !prefixed {
			name = hfName(p.Name)
		}
		if hfName(p.Name) == "wte.weight" {
			wte = p
		}
		v, ok := files[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		used[name] = true
		s := loadStep{view: v, shape: fileShape(v), transposed: layout == LayoutHF && isConv1D(p)}
		want := p.Value.Shape()
		if s.transposed {
			want = []int{want[1], want[0]}
		}
		if !slices.Equal(s.shape, want) {
			how := ""
			if s.transposed {
				how = fmt.Sprintf(" (Conv1D (in, out) of the model's %v)", p.Value.Shape())
			}
			return nil, &mismatchError{fmt.Sprintf("%q has shape %v in the file, the model wants %v%s", name, s.shape, want, how)}
		}
		dt, err := floatDType(v)
		if err == nil {
			err = checkFinite(v, dt)
		}
		if err != nil {
			return nil, fmt.Errorf("%q: %w", name, err)
		}
		s.dt = dt
		steps[i] = s
	}
	var unexpected []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if used[name] || attnBuffer.MatchString(name) {
			continue
		}
		if name == tiedHead {
			if err := checkTied(files, wte, layout, prefixed); err != nil {
				return nil, err
			}
			continue
		}
		unexpected = append(unexpected, name)
	}
	if len(missing) > 0 || len(unexpected) > 0 {
		slices.Sort(missing)
		return nil, &mismatchError{fmt.Sprintf("missing %v, unexpected %v", short(missing), short(unexpected))}
	}
	return steps, nil
}

// short lists at most 12 names, then how many more.
func short(names []string) string {
	const n = 12
	if len(names) <= n {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more]", strings.TrimSuffix(fmt.Sprint(names[:n]), "]"), len(names)-n)
}

// checkTied accepts a head equal to the token table (the GPT ties them);
// without a token table among the parameters the head is ignored.
func checkTied(files map[string]st.TensorView, wte *Parameter, layout Layout, prefixed bool) error {
	if wte == nil {
		return nil
	}
	name := wte.Name
	if layout == LayoutHF && !prefixed {
		name = hfName(name)
	}
	head, table := files[tiedHead], files[name]
	if _, ok := files[name]; !ok {
		return nil // reported as missing
	}
	if !slices.Equal(fileShape(head), fileShape(table)) {
		return &mismatchError{fmt.Sprintf("%q has shape %v, the token table %q %v: the GPT ties its output head to the token table", tiedHead, fileShape(head), name, fileShape(table))}
	}
	if head.DType() == table.DType() && bytes.Equal(head.Data(), table.Data()) {
		return nil
	}
	equal := false
	err := tensor.Try(func() {
		c := tensor.NewCtx()
		c.WithScope(func() {
			h, err := hostTensor(c, head)
			if err != nil {
				panic(err)
			}
			t, err := hostTensor(c, table)
			if err != nil {
				panic(err)
			}
			equal = slices.Equal(h.Float64s(), t.Float64s())
		})
	})
	if err != nil {
		return fmt.Errorf("%q: %w", tiedHead, err)
	}
	if !equal {
		return fmt.Errorf("%q differs from %q: the GPT ties its output head to the token table and cannot load an untied one", tiedHead, name)
	}
	return nil
}

// hostTensor makes a CPU tensor of a float file tensor.
func hostTensor(c *tensor.Ctx, v st.TensorView) (*tensor.Tensor, error) {
	dt, err := floatDType(v)
	if err != nil {
		return nil, err
	}
	return c.FromBytes(tensor.CPU(), dt, v.Data(), fileShape(v)...)
}

// floatDType is the dtype of a file tensor, which must be a float: any
// other is an error wrapping tensor.ErrArgument, as LoadTrainState's
// (checkWeights).
func floatDType(v st.TensorView) (tensor.DType, error) {
	switch v.DType() {
	case st.F64, st.F32, st.F16, st.BF16:
		return tensor.ParseDType(v.DType().String())
	}
	return 0, fmt.Errorf("dtype %v: want a float (F32, F16, BF16 or F64): %w", v.DType(), tensor.ErrArgument)
}

// fileShape is v's shape as ints: load has checked that each fits
// (tensor.SafetensorsShape).
func fileShape(v st.TensorView) []int {
	s := make([]int, len(v.Shape()))
	for i, d := range v.Shape() {
		s[i] = int(d)
	}
	return s
}
