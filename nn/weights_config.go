package nn

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strata-ml/strata/tensor"
)

// ParseGPTConfig reads a GPT shape written as train-gpt writes it in its
// weights' metadata ("config": fmt.Sprintf("%+v", cfg), e.g. "{Vocab:256
// Context:64 Layers:2 Heads:4 Width:128 Dropout:0 Batch:128}") or as a
// JSON object with GPTConfig's field names. Unknown fields, a field given
// twice and text after the object are errors wrapping tensor.ErrArgument,
// as Validate's are; the result is validated.
func ParseGPTConfig(s string) (GPTConfig, error) {
	var c GPTConfig
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "{"); ok && strings.HasPrefix(strings.TrimSpace(rest), `"`) { // JSON, indented or not
		d := json.NewDecoder(strings.NewReader(s))
		d.DisallowUnknownFields()
		err := d.Decode(&c)
		if err == nil {
			err = jsonFieldsOnce(s)
		}
		if err == nil {
			if _, end := d.Token(); end != io.EOF {
				err = errors.New("text after the object")
			}
		}
		if err != nil {
			return c, fmt.Errorf("nn: GPT config %q: %w (%w)", s, err, tensor.ErrArgument)
		}
		return c, c.Validate()
	}
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return c, fmt.Errorf("nn: GPT config %q: want {Vocab:V Context:T Layers:L Heads:H Width:C ...} or JSON: %w", s, tensor.ErrArgument)
	}
	seen := map[string]bool{}
	for _, f := range strings.Fields(s[1 : len(s)-1]) {
		k, v, ok := strings.Cut(f, ":")
		if seen[k] {
			return c, fmt.Errorf("nn: GPT config %q: field %s given twice: %w", s, k, tensor.ErrArgument)
		}
		seen[k] = true
		var err error
		switch k {
		case "Vocab":
			c.Vocab, err = strconv.Atoi(v)
		case "Context":
			c.Context, err = strconv.Atoi(v)
		case "Layers":
			c.Layers, err = strconv.Atoi(v)
		case "Heads":
			c.Heads, err = strconv.Atoi(v)
		case "Width":
			c.Width, err = strconv.Atoi(v)
		case "Dropout":
			c.Dropout, err = strconv.ParseFloat(v, 64)
		case "Batch":
			c.Batch, err = strconv.Atoi(v)
		default:
			ok = false
		}
		if !ok || err != nil {
			return c, fmt.Errorf("nn: GPT config %q: bad field %q: %w", s, f, tensor.ErrArgument)
		}
	}
	return c, c.Validate()
}

// jsonFieldsOnce refuses a JSON object that names a field twice (the
// decoder keeps the last; its names match GPTConfig's without regard to
// case, so "vocab" and "Vocab" are one field).
func jsonFieldsOnce(s string) error {
	d := json.NewDecoder(strings.NewReader(s))
	if _, err := d.Token(); err != nil { // {
		return err
	}
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return err
		}
		k, _ := t.(string)
		if seen[strings.ToLower(k)] {
			return fmt.Errorf("field %q given twice", k)
		}
		seen[strings.ToLower(k)] = true
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return err
		}
	}
	return nil
}

// configKey is the metadata entry with a GPT's config, as train-gpt and
// GPT.SaveWeights write it (fmt.Sprintf("%+v", cfg)).
const configKey = "config"

// SaveWeights writes the model's parameters as SaveWeightsLayout does
// (LayoutAuto, the zero value, is the default LayoutNanoGPT),
// with its config recorded in the metadata's "config" entry in
// train-gpt's format, so that GPTConfigOfWeights reads the whole shape
// back, heads included (the tensor shapes do not tell them). meta is
// added (it is not changed); a "config" entry in it that is not the
// model's is an error wrapping tensor.ErrArgument.
func (g *GPT) SaveWeights(ctx context.Context, path string, meta map[string]string, layout Layout) error {
	cfg := fmt.Sprintf("%+v", g.Config)
	if s, ok := meta[configKey]; ok && s != cfg {
		return fmt.Errorf("nn: saving %s: metadata %s = %q, the model's is %q: %w", path, configKey, s, cfg, tensor.ErrArgument)
	}
	md := make(map[string]string, len(meta)+1)
	maps.Copy(md, meta)
	md[configKey] = cfg
	return SaveWeightsLayout(ctx, path, g.Parameters(), md, layout)
}

// blockName matches a block's parameter and captures its number.
var blockName = regexp.MustCompile(`^(?:transformer\.)?h\.([0-9]+)\.`)

// GPTConfigOfWeights returns the shape of the GPT in a weights file
// without reading its tensors: from its metadata's "config" entry when it
// has one (train-gpt and GPT.SaveWeights write it; fromMeta is then
// true), else from the
// tensor shapes in either layout: vocabulary and width from the token
// table, context from the position table, layers from the block numbers.
// Shapes do not tell the number of heads: it is 0 then, for the caller
// to set (Hugging Face keeps n_head in config.json).
func GPTConfigOfWeights(path string) (cfg GPTConfig, fromMeta bool, err error) {
	info, err := ReadWeightsInfo(path)
	if err != nil {
		return cfg, false, err
	}
	return info.Config()
}

// checkConfigShapes refuses a metadata config that the tensor shapes
// contradict (a context of 10^9 over a position table of 64 rows would
// build the model before the load saw the mismatch, running out of memory
// instead). Shapes that tell no GPT are left for the load to report.
func checkConfigShapes(path string, cfg GPTConfig, shapes map[string][]int) error {
	got, _, err := configOfShapes(path, shapes)
	if err != nil {
		return nil
	}
	var diff []string
	for _, f := range []struct {
		name      string
		meta, got int
	}{{"vocabulary", cfg.Vocab, got.Vocab}, {"context", cfg.Context, got.Context}, {"layers", cfg.Layers, got.Layers}, {"width", cfg.Width, got.Width}} {
		if f.meta != f.got {
			diff = append(diff, fmt.Sprintf("%s %d in the metadata, %d in the tensors", f.name, f.meta, f.got))
		}
	}
	if len(diff) == 0 {
		return nil
	}
	return &mismatchError{fmt.Sprintf("nn: %s: the metadata's config disagrees with the tensor shapes: %s", path, strings.Join(diff, ", "))}
}

// configOfShapes is the shape of the GPT whose tensors have shapes, all
// but the heads.
func configOfShapes(path string, shapes map[string][]int) (cfg GPTConfig, fromMeta bool, err error) {
	table := func(name string) ([]int, error) {
		for _, n := range []string{hfPrefix + name, name} {
			if s, ok := shapes[n]; ok {
				if len(s) != 2 {
					return nil, fmt.Errorf("nn: %s: %q has shape %v, want 2-D", path, n, s)
				}
				return s, nil
			}
		}
		return nil, fmt.Errorf("nn: %s: no %q or %q: not a GPT's weights", path, hfPrefix+name, name)
	}
	wte, err := table("wte.weight")
	if err != nil {
		return cfg, false, err
	}
	wpe, err := table("wpe.weight")
	if err != nil {
		return cfg, false, err
	}
	if wpe[1] != wte[1] {
		return cfg, false, fmt.Errorf("nn: %s: token table %v and position table %v differ in width", path, wte, wpe)
	}
	for name := range shapes {
		if m := blockName.FindStringSubmatch(name); m != nil {
			n, err := strconv.Atoi(m[1])
			if err == nil && n < 1<<20 {
				cfg.Layers = max(cfg.Layers, n+1)
			}
		}
	}
	if cfg.Layers == 0 {
		return cfg, false, fmt.Errorf("nn: %s: no transformer blocks (h.N.*)", path)
	}
	cfg.Vocab, cfg.Width, cfg.Context = wte[0], wte[1], wpe[0]
	return cfg, false, nil
}

// readHeader reads the tensor shapes and the metadata of a safetensors
// file from its header alone. A header over tensor.MaxSafetensorsHeader
// bytes is refused, as tensor.ReadSafetensors refuses it, and so is a
// tensor entry whose bytes do not match its shape (checkTensorEntry): a
// caller sizes a model from these shapes before the load would see the
// file's data is not theirs (a 2 MB file whose position table says
// 100,000,000 rows made generate allocate 47 GiB).
func readHeader(path string) (shapes map[string][]int, meta map[string]string, data int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("nn: reading weights: %w", err)
	}
	defer f.Close()
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return nil, nil, 0, fmt.Errorf("nn: %s: not a safetensors file: %w", path, err)
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > tensor.MaxSafetensorsHeader { // the tensor package's readers' bound
		return nil, nil, 0, fmt.Errorf("nn: %s: not a safetensors file: a header of %d bytes, over the limit of %d bytes", path, size, tensor.MaxSafetensorsHeader)
	}
	data = -1 // the bytes after the header; -1: unknown (not a regular file)
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		if size > uint64(st.Size())-8 {
			// Before the buffer is made: a small file claiming a long header
			// would otherwise cost that much memory to refuse.
			return nil, nil, 0, fmt.Errorf("nn: %s: not a safetensors file: a header of %d bytes in a file of %d", path, size, st.Size())
		}
		data = st.Size() - 8 - int64(size)
	}
	hdr := make([]byte, size)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, nil, 0, fmt.Errorf("nn: %s: not a safetensors file: %w", path, err)
	}
	if !utf8.Valid(hdr) { // encoding/json would read it with U+FFFD; tensor's readers refuse it
		return nil, nil, 0, fmt.Errorf("nn: %s: not a safetensors file: the header is not valid UTF-8", path)
	}
	var h map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &h); err != nil {
		return nil, nil, 0, fmt.Errorf("nn: %s: not a safetensors file: %w", path, err)
	}
	if err := tensor.CheckSafetensorsHeader(path, hdr); err != nil { // a key twice: json kept the last
		return nil, nil, 0, fmt.Errorf("nn: %w", err)
	}
	shapes = make(map[string][]int, len(h))
	for name, raw := range h {
		if name == "__metadata__" {
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, nil, 0, fmt.Errorf("nn: %s: bad metadata: %w", path, err)
			}
			continue
		}
		var info tensorEntry
		if err := json.Unmarshal(raw, &info); err != nil {
			return nil, nil, 0, fmt.Errorf("nn: %s: tensor %q: %w", path, name, err)
		}
		if err := info.check(data); err != nil {
			return nil, nil, 0, fmt.Errorf("nn: %s: not a safetensors file: tensor %q: %w", path, name, err)
		}
		shapes[name] = info.Shape
	}
	return shapes, meta, data, nil
}

// tensorEntry is a tensor's entry in a safetensors header.
type tensorEntry struct {
	DType   string  `json:"dtype"`
	Shape   []int   `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// dtypeBytes is the size of an element of each safetensors dtype.
var dtypeBytes = map[string]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// check refuses an entry whose bytes are not its shape's: data_offsets
// that are not [begin, end] with begin <= end within the data (data
// bytes after the header; -1: unknown, unchecked), a dimension below 0,
// or end - begin other than the shape's elements times the dtype's size
// (a dtype not in dtypeBytes is left for the load to report).
func (e tensorEntry) check(data int64) error {
	if len(e.Offsets) != 2 {
		return fmt.Errorf("data_offsets %v: want [begin, end]", e.Offsets)
	}
	begin, end := e.Offsets[0], e.Offsets[1]
	switch {
	case begin < 0 || end < begin:
		return fmt.Errorf("data_offsets %v: want 0 <= begin <= end", e.Offsets)
	case data >= 0 && end > data:
		return fmt.Errorf("data_offsets %v: past the end of the file's %d bytes of data", e.Offsets, data)
	}
	elems := int64(1)
	for _, d := range e.Shape {
		if d < 0 {
			return fmt.Errorf("shape %v: a dimension below 0", e.Shape)
		}
		if d != 0 && elems > math.MaxInt64/int64(d) {
			return fmt.Errorf("shape %v needs more bytes than an int64 counts, its data has %d", e.Shape, end-begin)
		}
		elems *= int64(d)
	}
	size, ok := dtypeBytes[e.DType]
	if !ok {
		return nil
	}
	if elems > math.MaxInt64/size {
		return fmt.Errorf("shape %v needs more bytes than an int64 counts, its data has %d", e.Shape, end-begin)
	}
	if need := elems * size; need != end-begin {
		return fmt.Errorf("shape %v needs %d bytes, its data has %d", e.Shape, need, end-begin)
	}
	return nil
}
