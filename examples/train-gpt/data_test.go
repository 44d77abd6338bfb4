package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
	"github.com/strata-ml/strata/tokenizer"
)

// writeTokenFile writes ids as an llm.c token file (version 1), or, with
// raw, as nanoGPT's headerless uint16 file.
func writeTokenFile(t *testing.T, path string, ids []uint16, raw bool) {
	var b []byte
	if !raw {
		h := make([]byte, llmcHeaderBytes)
		binary.LittleEndian.PutUint32(h, llmcMagic)
		binary.LittleEndian.PutUint32(h[4:], 1)
		binary.LittleEndian.PutUint32(h[8:], uint32(len(ids)))
		b = h
	}
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint16(b, id)
	}
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func mustTokenizer(t testing.TB, name string) tokenizer.Tokenizer {
	tok, err := tokenizer.New(name)
	require.NoError(t, err)
	return tok
}

// Both token file formats read back the ids written; every malformed file
// is refused with an error naming it and what is wrong.
func TestTokenFiles(t *testing.T) {
	dir := t.TempDir()
	gpt2, byteTok := mustTokenizer(t, "gpt2"), mustTokenizer(t, "byte")
	ids := make([]uint16, 2000)
	for i := range ids {
		ids[i] = uint16(i * 37 % 50257)
	}
	llmc, raw := filepath.Join(dir, "llmc.bin"), filepath.Join(dir, "raw.bin")
	writeTokenFile(t, llmc, ids, false)
	writeTokenFile(t, raw, ids, true)
	for path, what := range map[string]string{llmc: "llm.c token file, version 1", raw: "nanoGPT token file"} {
		d, err := loadTokens(path, gpt2, 64, nil)
		require.NoError(t, err, path)
		require.Equal(t, ids, slices.Concat(d.train, d.test), path)
		require.Len(t, d.test, 200, "the last tenth is held out")
		require.Contains(t, d.describe(), what)
	}
	_, err := loadTokens(llmc, byteTok, 64, nil)
	require.ErrorContains(t, err, "token 259 at position 7 is outside -tokenizer byte's vocabulary of 256 ids (GPT-2 tokens? use -tokenizer gpt2)")
	require.ErrorContains(t, err, llmc)

	good, err := os.ReadFile(llmc)
	require.NoError(t, err)
	bad := func(name string, edit func(b []byte) []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, edit(bytes.Clone(good)), 0o644))
		return p
	}
	for path, msg := range map[string]string{
		bad("short.bin", func(b []byte) []byte { return b[:len(b)-2] }):                   "the llm.c header says 2000 tokens (4000 bytes after the 1024-byte header), the file has 3998 bytes after it",
		bad("long.bin", func(b []byte) []byte { return append(b, 0, 0) }):                 "the file has 4002 bytes after it",
		bad("header.bin", func(b []byte) []byte { return b[:100] }):                       "an llm.c token file (magic 20240520) of 100 bytes, shorter than its 1024-byte header",
		bad("v2.bin", func(b []byte) []byte { b[4] = 2; return b }):                       "version 2 (LLaMA 3's uint32 tokens) is not supported",
		bad("v7.bin", func(b []byte) []byte { b[4] = 7; return b }):                       "unknown version 7",
		bad("neg.bin", func(b []byte) []byte { b[11] = 0xff; return b }):                  "the llm.c header says -",
		bad("odd.bin", func(b []byte) []byte { b[0] = 1; return b[:1025] }):               "1025 bytes, an odd number: not a token file",
		bad("big.bin", func(b []byte) []byte { b[1024], b[1025] = 0xff, 0xff; return b }): "token 65535 at position 0 is outside -tokenizer gpt2's vocabulary of 50257 ids",
		bad("tiny.bin", func(b []byte) []byte { return b[1024 : 1024+2*100] }):            "100 tokens is too short for context 64 (need at least 660)",
		filepath.Join(dir, "missing.bin"):                                                 "no such file",
	} {
		_, err := loadTokens(path, gpt2, 64, nil)
		require.ErrorContains(t, err, msg, path)
		require.ErrorContains(t, err, path)
	}
}

// A text file and the llm.c and nanoGPT files of its bytes train the same
// run, loss for loss: the data position is the same function of the seed.
func TestTextAndTokenFilesTrainAlike(t *testing.T) {
	text := textFile(t)
	b, err := os.ReadFile(text)
	require.NoError(t, err)
	ids := make([]uint16, len(b))
	for i, c := range b {
		ids[i] = uint16(c)
	}
	dir := t.TempDir()
	llmc, raw := filepath.Join(dir, "text.bin"), filepath.Join(dir, "raw.BIN")
	writeTokenFile(t, llmc, ids, false)
	writeTokenFile(t, raw, ids, true)
	var logs []string
	for _, data := range []string{text, llmc, raw} {
		log := filepath.Join(t.TempDir(), "loss.jsonl")
		o, err := parseFlags([]string{"-data", data, "-steps", "3", "-batch", "2", "-device", "cpu", "-quiet", "-eval-every", "0", "-out", "", "-sample", "0", "-loss-log", log})
		require.NoError(t, err)
		require.NoError(t, run(o), data)
		l, err := os.ReadFile(log)
		require.NoError(t, err)
		logs = append(logs, string(l))
	}
	require.Equal(t, 3, strings.Count(logs[0], "\n"))
	require.Equal(t, logs[0], logs[1], "llm.c file")
	require.Equal(t, logs[0], logs[2], "nanoGPT file")
}

// -tokenizer and -vocab: bad values are refused up front, with what is
// accepted; a tokenizer wider than the model's vocabulary is refused
// before any work, naming both sizes and the way out.
func TestTokenizerFlags(t *testing.T) {
	text := textFile(t)
	for args, msg := range map[string]string{
		"-tokenizer bpe -data x.txt": `-tokenizer "bpe": want byte or gpt2`,
		"-tokenizer gpt2":            "-tokenizer gpt2: the built-in addition task is bytes; give -data",
		"-vocab -5":                  "-vocab -5: want 0 (the config's) or more",
		"-progress-every -1s":        "-progress-every -1s",
	} {
		_, err := parseFlags(strings.Fields(args))
		require.ErrorContains(t, err, msg, args)
	}
	o, err := parseFlags([]string{"-tokenizer", "gpt2", "-data", text, "-device", "cpu", "-quiet", "-out", ""})
	require.NoError(t, err)
	err = run(o)
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex), "%v", err)
	require.Equal(t, 2, ex.Code)
	require.Equal(t, "-tokenizer gpt2 has 50257 ids, more than the model's vocabulary of 256 (-config tiny): use -config gpt2, or -vocab 50257 or more", ex.Msg)
	o, err = parseFlags([]string{"-tokenizer", "gpt2", "-data", text, "-vocab", "50000", "-config", "char", "-device", "cpu", "-quiet", "-out", ""})
	require.NoError(t, err)
	require.ErrorContains(t, run(o), "more than the model's vocabulary of 50000 (-config char)")
}

// A small model trains on GPT-2 tokens of a text file: the text is
// tokenized, held out, evaluated, sampled and decoded, and a state of
// this run refuses to resume as a byte-level one (-tokenizer byte given).
func TestTrainWithGPT2Tokenizer(t *testing.T) {
	text := textFile(t)
	dir := t.TempDir()
	args := []string{"-tokenizer", "gpt2", "-vocab", "50257", "-data", text, "-steps", "3", "-batch", "2", "-device", "cpu", "-quiet",
		"-eval-every", "2", "-sample", "4", "-out", filepath.Join(dir, "w.safetensors"), "-loss-log", filepath.Join(dir, "loss.jsonl")}
	o, err := parseFlags(args)
	require.NoError(t, err)
	o.stopAt = 2
	var ex *cli.ExitError
	require.True(t, errors.As(run(o), &ex))
	require.Equal(t, 130, ex.Code)
	// -tokenizer byte given (left out, -resume takes the saved run's).
	o, err = parseFlags(append(slices.Clone(args[2:]), "-tokenizer", "byte", "-resume", filepath.Join(dir, "w.state.safetensors")))
	require.NoError(t, err)
	require.ErrorContains(t, run(o), "saved by a -tokenizer gpt2 run, this one is -tokenizer byte")
	o, err = parseFlags(append(args, "-resume", filepath.Join(dir, "w.state.safetensors")))
	require.NoError(t, err)
	require.NoError(t, run(o))
	l, err := os.ReadFile(filepath.Join(dir, "loss.jsonl"))
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(l), "\n"))
	require.Contains(t, string(l), `{"step": 2, "loss": `)
	require.Contains(t, string(l), `"held_out_loss": `)
	_, err = os.Stat(filepath.Join(dir, "w.loss.png"))
	require.NoError(t, err)
}

// The loader yields the batches that drawing them in the loop did, and
// each slot carries the generator's state after its batch.
func TestLoaderBatches(t *testing.T) {
	text := textFile(t)
	o, err := parseFlags([]string{"-data", text, "-batch", "3", "-steps", "10"})
	require.NoError(t, err)
	data, err := loadTokens(text, o.tok, 16, o.hostBudget)
	require.NoError(t, err)
	cfg := nn.GPTConfig{Vocab: 256, Context: 16, Layers: 1, Heads: 2, Width: 16}
	tr, err := newTrainer(o, cfg, tensor.CPU(), 16)
	require.NoError(t, err)
	defer tr.release()
	ref := rand.NewPCG(o.seed, 0xDA7A)
	refRng := rand.New(ref)
	xs, ys := make([]int32, 3*16), make([]int32, 3*16)
	ld, err := startLoader(tr, data)
	require.NoError(t, err)
	for i := range 7 {
		s, err := ld.next()
		require.NoError(t, err)
		data.batch(refRng, xs, ys, 3, 16)
		require.Equal(t, xs, s.xs, "batch %d", i)
		require.Equal(t, ys, s.ys, "batch %d", i)
		state, _ := ref.MarshalBinary()
		require.Equal(t, state, s.rng, "batch %d", i)
		require.NotNil(t, s.x, "on the CPU the slots are staging tensors written in place")
		require.Equal(t, xs, s.x.Int32s())
		ld.put(s)
	}
	ld.stop()

	// A batch that fails to draw (a panic of the data) is an error.
	ld, err = startLoader(tr, panicData{})
	require.NoError(t, err)
	_, err = ld.next()
	require.ErrorContains(t, err, "data loader: no data here")
	ld.stop()

	// A slot of host slices (staging not host-accessible) trains as the
	// trainer's own buffers do.
	for i := range tr.xs {
		tr.xs[i], tr.ys[i] = int32(i%50), int32((i+1)%50)
	}
	s := &slot{xs: slices.Clone(tr.xs), ys: slices.Clone(tr.ys)}
	before := tr.c.BytesInUse()
	lossSlot, err := tr.stepOn(0, s)
	require.NoError(t, err)
	require.Equal(t, before, tr.c.BytesInUse())
	require.Greater(t, lossSlot, 0.0)
}

type panicData struct{}

func (panicData) seqLen(int) (int, error)                      { return 16, nil }
func (panicData) batch(*rand.Rand, []int32, []int32, int, int) { panic("no data here") }
func (panicData) describe() string                             { return "panics" }

// -init loads a run's weights before training (the first loss is the
// trained model's), refuses weights of another shape, and does not go
// with -resume.
func TestInitFlag(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.safetensors")
	common := []string{"-batch", "8", "-device", "cpu", "-quiet", "-eval-every", "0", "-sample", "0"}
	o, err := parseFlags(append([]string{"-steps", "30", "-out", w, "-loss-log", filepath.Join(dir, "a.jsonl"), "-lr", "3e-3", "-warmup", "0"}, common...))
	require.NoError(t, err)
	require.NoError(t, run(o))
	firstLoss := func(log string) float64 {
		b, err := os.ReadFile(log)
		require.NoError(t, err)
		var l lossLine
		require.NoError(t, json.Unmarshal(bytes.SplitN(b, []byte("\n"), 2)[0], &l))
		require.Equal(t, 1, l.Step)
		require.NotNil(t, l.Loss)
		return *l.Loss
	}
	o, err = parseFlags(append([]string{"-steps", "1", "-out", "", "-loss-log", filepath.Join(dir, "b.jsonl"), "-init", w}, common...))
	require.NoError(t, err)
	require.NoError(t, run(o))
	o, err = parseFlags(append([]string{"-steps", "1", "-out", "", "-loss-log", filepath.Join(dir, "c.jsonl")}, common...))
	require.NoError(t, err)
	require.NoError(t, run(o))
	require.Less(t, firstLoss(filepath.Join(dir, "b.jsonl")), firstLoss(filepath.Join(dir, "c.jsonl"))-0.5, "the initial weights are the trained ones")

	o, err = parseFlags(append([]string{"-steps", "1", "-out", "", "-init", w, "-vocab", "300"}, common...))
	require.NoError(t, err)
	err = run(o)
	require.ErrorContains(t, err, "-init "+w)
	require.ErrorContains(t, err, "transformer.wte.weight")
	// A training state is not weights: the error says to resume it.
	st := filepath.Join(dir, "s.state.safetensors")
	o, err = parseFlags(append([]string{"-steps", "2", "-out", "", "-save-every", "1", "-state", st}, common...))
	require.NoError(t, err)
	require.NoError(t, run(o))
	o, err = parseFlags(append([]string{"-steps", "1", "-out", "", "-init", st}, common...))
	require.NoError(t, err)
	require.ErrorContains(t, run(o), "-init "+st+": a training state (after step 2), not weights: continue it with -resume")
	_, err = parseFlags([]string{"-init", w, "-resume", w})
	require.ErrorContains(t, err, "-init "+w+": not with -resume")
	_, err = parseFlags([]string{"-init", w, "-bench"})
	require.ErrorContains(t, err, "-init starts training from weights: not with -bench")
	o, err = parseFlags(append([]string{"-init", filepath.Join(dir, "none.safetensors")}, common...))
	require.NoError(t, err)
	err = run(o)
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex))
	require.Equal(t, 2, ex.Code)
	require.Contains(t, ex.Msg, "-init: stat ")
}

// -loss-plot: a PNG next to -out by default, a path of one's own, "off";
// an unwritable path is refused up front; a resumed run plots the steps
// of its loss log too.
func TestLossPlot(t *testing.T) {
	dir := t.TempDir()
	o, err := parseFlags([]string{"-out", filepath.Join(dir, "m.safetensors")})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "m.loss.png"), o.lossPlot)
	o, err = parseFlags([]string{"-out", filepath.Join(dir, "m.safetensors"), "-loss-plot", "off"})
	require.NoError(t, err)
	require.Empty(t, o.lossPlot)
	o, err = parseFlags([]string{"-out", ""})
	require.NoError(t, err)
	require.Empty(t, o.lossPlot, "no -out, no default plot")

	plot := filepath.Join(dir, "curves.png")
	o, err = parseFlags([]string{"-steps", "12", "-batch", "8", "-device", "cpu", "-quiet", "-eval-every", "3", "-out", "", "-loss-plot", plot})
	require.NoError(t, err)
	require.NoError(t, run(o))
	f, err := os.Open(plot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Equal(t, 9*96, img.Bounds().Dx())
	require.Equal(t, 5*96, img.Bounds().Dy())

	o, err = parseFlags([]string{"-steps", "1", "-device", "cpu", "-quiet", "-loss-plot", filepath.Join(dir, "no", "p.png")})
	require.NoError(t, err)
	err = run(o)
	var ex *cli.ExitError
	require.True(t, errors.As(err, &ex))
	require.Equal(t, 2, ex.Code)
	require.Contains(t, ex.Msg, "-loss-plot: cannot write")

	log := filepath.Join(dir, "loss.jsonl")
	require.NoError(t, os.WriteFile(log, []byte("{\"step\": 1, \"loss\": 5}\n{\"step\": 2, \"loss\": 4, \"held_out_loss\": 4.5}\nnot json\n{\"step\": 3, \"loss\": 3}\n"), 0o644))
	var h lossHistory
	require.NoError(t, h.load(log, 2))
	require.Len(t, h.train, 2)
	require.Len(t, h.heldOut, 1)
	require.Equal(t, 4.5, h.heldOut[0].Y)
	require.NoError(t, h.load(filepath.Join(dir, "missing.jsonl"), 2))
	require.Error(t, writeLossPlot(t.Context(), plot, "empty", &lossHistory{}))
}

// The loss axis is labelled within a decade (gonum's log ticks label only
// powers of ten) and sparsely over many decades.
func TestLogTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var l []string
		for _, tk := range (logTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				l = append(l, tk.Label)
			}
		}
		return l
	}
	require.Equal(t, []string{"1.2", "1.5", "2", "3", "4", "5"}, labels(1.1, 5.6))
	require.Equal(t, []string{"0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5"}, labels(0.001, 6))
	// A narrow range (a short run, or one whose loss stalled) that holds
	// none of those multiples, or one: the axis had no number on it.
	for _, r := range [][2]float64{{5.365, 5.578}, {2.3, 2.5}, {1.9, 2.1}} {
		require.GreaterOrEqual(t, len(labels(r[0], r[1])), 2, "%v", r)
	}
}

// Any file is read or refused with an error naming it, never a panic,
// and what is read is in the vocabulary: 2000 random files, most of them
// an llm.c header with random damage.
func TestReadTokenFileArbitrary(t *testing.T) {
	tok := mustTokenizer(t, "gpt2")
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	read := 0
	for i := range 2000 {
		var b []byte
		if i%4 != 0 {
			b = make([]byte, llmcHeaderBytes)
			binary.LittleEndian.PutUint32(b, llmcMagic)
			binary.LittleEndian.PutUint32(b[4:], uint32(rng.IntN(3)))
			binary.LittleEndian.PutUint32(b[8:], uint32(rng.IntN(40)-2))
		}
		for range rng.IntN(80) {
			b = append(b, byte(rng.IntN(256)))
		}
		if len(b) > 0 && rng.IntN(3) == 0 {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		path := filepath.Join(dir, fmt.Sprintf("f%d.bin", i))
		require.NoError(t, os.WriteFile(path, b, 0o644))
		ids, _, err := readTokenFile(path, b, tok)
		if err != nil {
			require.Contains(t, err.Error(), path)
			continue
		}
		read++
		for _, id := range ids {
			require.Less(t, int(id), 50257)
		}
	}
	require.Greater(t, read, 10, "some of them are valid files")
}

// -out records the tokenizer (generate reads it): a byte-level model with
// a vocabulary of GPT-2's size is not taken for a GPT-2 BPE model.
func TestWeightsRecordTokenizer(t *testing.T) {
	w := filepath.Join(t.TempDir(), "w.safetensors")
	o, err := parseFlags([]string{"-steps", "1", "-batch", "2", "-vocab", "50257", "-device", "cpu", "-quiet", "-eval-every", "0", "-out", w})
	require.NoError(t, err)
	require.NoError(t, run(o))
	md, err := tensor.ReadSafetensorsMetadata(w)
	require.NoError(t, err)
	require.Equal(t, "byte", md["tokenizer"])
}
