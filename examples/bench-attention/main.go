// Command bench-attention times causal self-attention, forward and
// backward, plain (autograd.CausalAttention: the (B, H, T, T)
// probabilities materialised, recomputed in backward) against fused
// (autograd.FusedCausalAttention, FlashAttention-2), at gpt2's shape by
// default (B 8, H 12, T 1024, hd 64), in each precision asked for. Two
// more rows start from a transformer's (B, T, 3C) q/k/v product, as nn's
// attention does: "fused+split" splits the heads and merges the output
// with copies around FusedCausalAttention, "fused-qkv" is
// autograd.FusedCausalAttentionQKV (the heads read in place). It prints
// one JSON line per row on stdout and a table on stderr. Every row also
// reports the activation peak of the pass and how far its output and
// gradients are from the plain ones (fused-qkv: from fused+split's), with
// -dropout too: every path draws the same mask for the same seed
// (autograd.FusedCausalAttention), so a large error there is a bug.
// Exit status: 0, 2 for a bad flag (a -device that cannot be used, a
// precision named twice), 1 for a failure of the run, writing the rows
// to stdout or the table to stderr included.
//
//	go run ./examples/bench-attention -device cuda -precision fp32,bf16,fp16
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

type result struct {
	Device    string  `json:"device"`
	Attention string  `json:"attention"`
	Precision string  `json:"precision"`
	Kernels   string  `json:"kernels"` // cpu, simt (float32 math), mma (tensor cores) or mma-tf32x3 (float32 in three TF32 products)
	B         int     `json:"B"`
	H         int     `json:"H"`
	T         int     `json:"T"`
	HD        int     `json:"hd"`
	Dropout   float64 `json:"dropout"`
	Iters     int     `json:"iters"`
	FwdMS     float64 `json:"forward_ms"`
	FwdBwdMS  float64 `json:"forward_backward_ms"`
	TFLOPS    float64 `json:"tflops"` // FLOPs of FlashAttention-2's count, 3.5 x 4 B H T² hd halved by the mask, over the forward+backward time
	PeakMiB   float64 `json:"peak_mib"`
	ActMiB    float64 `json:"activation_peak_mib"`
	// MaxErr is the output's and gradients' largest distance from the
	// reference's, relative to each one's largest element: fused-qkv's
	// from fused+split's, the others' from plain's, 0 for the references
	// (with dropout too: the paths draw the same mask).
	MaxErr float64 `json:"max_rel_err_vs_plain"`
}

// main exits with 0 on success and for -h, 2 for a bad flag, 1 for a
// failure of the run.
func main() {
	err := run(os.Args[1:])
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "bench-attention:", err)
	}
	os.Exit(cli.ExitCode(err))
}

func run(args []string) error { return runTo(args, os.Stdout, os.Stderr) }

// runTo runs with the JSON lines written to stdout and the table to
// stderr; a write of either that fails is a failure of the run.
func runTo(args []string, stdout, stderr io.Writer) error {
	out, errOut := &cli.StickyWriter{W: stdout}, &cli.StickyWriter{W: stderr}
	if err := bench(args, out, errOut); err != nil {
		return err
	}
	if out.Err != nil {
		return fmt.Errorf("writing the results to stdout: %w", out.Err)
	}
	if errOut.Err != nil {
		return fmt.Errorf("writing the table to stderr: %w", errOut.Err)
	}
	return nil
}

func bench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-attention", flag.ContinueOnError)
	fs.SetOutput(stderr)
	device := fs.String("device", "cuda", "cpu, cuda or cuda:N")
	B := fs.Int("B", 8, "batch")
	H := fs.Int("H", 12, "heads")
	T := fs.Int("T", 1024, "sequence length")
	hd := fs.Int("hd", 64, "head size")
	p := fs.Float64("dropout", 0, "dropout on the probabilities")
	iters := fs.Int("iters", 10, "timed iterations (after 2 untimed)")
	precs := fs.String("precision", "fp32,bf16,fp16", "comma-separated: fp32, fp16, bf16 (autocast)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageHint(fs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"B", *B}, {"H", *H}, {"T", *T}, {"hd", *hd}, {"iters", *iters}} {
		if f.v < 1 {
			return cli.Usagef("-%s %d: want 1 or more", f.name, f.v)
		}
	}
	if !fits(*B, *H, *T, *T) || !fits(*B, *T, 3, *H, *hd) {
		return cli.Usagef("-B, -H, -T and -hd: %dx%dx%dx%d makes tensors larger than memory can address (plain attention's B x H x T x T probabilities, the B x T x 3H x hd q/k/v product)", *B, *H, *T, *hd)
	}
	if !(*p >= 0 && *p < 1) {
		return cli.Usagef("-dropout %v: want a probability in [0, 1)", *p)
	}
	var states []amp.State
	for i, prec := range strings.Split(*precs, ",") {
		st, err := parsePrecision(prec)
		if err != nil {
			return cli.UsageError{Err: err}
		}
		if slices.Contains(strings.Split(*precs, ",")[:i], prec) {
			return cli.Usagef("-precision: %q twice", prec)
		}
		states = append(states, st)
	}
	if err := cli.CheckDevice(*device); err != nil {
		return cli.UsageError{Err: err}
	}
	dev, err := cli.OpenDevice(*device)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	var rows []result
	for i, prec := range strings.Split(*precs, ",") {
		st := states[i]
		var plain, split [][]float64
		for _, name := range []string{"plain", "fused", "fused+split", "fused-qkv"} {
			r := result{Device: dev.String(), Attention: name, Kernels: "gemm+softmax", Precision: prec, B: *B, H: *H, T: *T, HD: *hd, Dropout: *p, Iters: *iters}
			if name != "plain" {
				r.Kernels = "simt"
				switch {
				case dev == tensor.CPU():
					r.Kernels = "cpu"
				case os.Getenv(tensor.EnvAttention) == "simt":
				case st.Enabled:
					r.Kernels = "mma"
				case *hd <= 64: // float32 on tensor cores in three TF32 products
					r.Kernels = "mma-tf32x3"
				}
			}
			var vals [][]float64
			if err := tensor.Try(func() { vals = measure(dev, st, name, &r) }); err != nil {
				return fmt.Errorf("%s %s: %w", prec, r.Attention, err)
			}
			var e float64
			switch name {
			case "plain":
				plain = vals
			case "fused":
				e = maxErr(vals, plain)
			case "fused+split":
				split = vals
			case "fused-qkv":
				e = maxErr(vals, split)
			}
			if err := finiteErr(e); err != nil {
				return fmt.Errorf("%s %s: %w", prec, r.Attention, err)
			}
			r.MaxErr = e
			line, err := json.Marshal(r)
			if err != nil {
				return fmt.Errorf("%s %s: %w", prec, r.Attention, err)
			}
			fmt.Fprintln(stdout, string(line))
			rows = append(rows, r)
		}
	}
	fmt.Fprintf(stderr, "\n| device | precision | attention | kernels | B x H x T x hd | forward ms | fwd+bwd ms | TFLOP/s | peak MiB | activation peak MiB | max rel err vs plain (fused-qkv: vs fused+split) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		errCol := fmt.Sprintf("%.2g", r.MaxErr)
		if r.Attention == "plain" || r.Attention == "fused+split" {
			errCol = "-" // the references
		}
		fmt.Fprintf(stderr, "| %s | %s | %s | %s | %dx%dx%dx%d | %.3f | %.3f | %.3g | %.1f | %.1f | %s |\n",
			r.Device, r.Precision, r.Attention, r.Kernels, r.B, r.H, r.T, r.HD, r.FwdMS, r.FwdBwdMS, r.TFLOPS, r.PeakMiB, r.ActMiB, errCol)
	}
	return nil
}

// maxElements bounds a tensor's elements: tensor refuses one of more
// bytes than memory can address (2^62), 4 bytes an element in float32.
const maxElements = 1 << 60

// fits reports whether a float32 tensor of shape dims (each 1 or more)
// has maxElements or fewer, without overflowing.
func fits(dims ...int) bool {
	n := 1
	for _, d := range dims {
		if n > maxElements/d {
			return false
		}
		n *= d
	}
	return true
}

func parsePrecision(s string) (amp.State, error) {
	switch s {
	case "fp32":
		return amp.State{}, nil
	case "fp16":
		return amp.State{Enabled: true, DType: tensor.Float16}, nil
	case "bf16":
		return amp.State{Enabled: true, DType: tensor.BFloat16}, nil
	}
	return amp.State{}, fmt.Errorf("-precision %q: want fp32, fp16 or bf16", s)
}

// measure times the configuration r names and returns the output and the
// gradients of the last pass, for the comparisons.
func measure(dev tensor.Device, st amp.State, name string, r *result) [][]float64 {
	c := tensor.NewCtx()
	rng := rand.New(rand.NewPCG(1, 2))
	shape, outShape := []int{r.B, r.H, r.T, r.HD}, []int{r.B, r.H, r.T, r.HD}
	nin := 3
	if name == "fused+split" || name == "fused-qkv" {
		shape, outShape, nin = []int{r.B, r.T, 3 * r.H * r.HD}, []int{r.B, r.T, r.H * r.HD}, 1
	}
	var xs []*tensor.Tensor // in c, so the ops see c's autocast state
	for range nin {
		xs = append(xs, c.RandN(dev, tensor.Float32, rng, 1, shape...))
	}
	xs = append(xs, c.RandN(dev, tensor.Float32, rng, 1, outShape...)) // the loss weights
	defer func() {
		for _, x := range xs {
			x.Release()
		}
	}()
	attend := attention(name, r)
	vars := make([]*autograd.Var, nin)
	for i := range vars {
		vars[i] = autograd.Const(xs[i])
		vars[i].SetRequiresGrad(true)
	}
	var out [][]float64
	pass := func(backward, keep bool) {
		c.WithScope(func() {
			var y *autograd.Var
			amp.With(c, st, func() { y = attend(vars) })
			if !backward {
				return
			}
			loss := autograd.Sum(autograd.Mul(y, autograd.Const(xs[nin])), false)
			if keep {
				out = [][]float64{y.Value.Float64s()}
			}
			if err := loss.Backward(); err != nil {
				panic(err)
			}
			for _, v := range vars {
				if keep {
					out = append(out, v.Grad.Float64s())
				}
				v.ZeroGrad()
			}
		})
	}
	sync := func() {
		if err := dev.Synchronize(); err != nil {
			panic(err)
		}
	}
	timeIt := func(backward bool) float64 {
		for range 2 {
			pass(backward, false)
		}
		sync()
		start := time.Now()
		for range r.Iters {
			pass(backward, false)
		}
		sync()
		return float64(time.Since(start).Nanoseconds()) / 1e6 / float64(r.Iters) // not whole microseconds: tiny shapes take ~2 us
	}
	r.FwdMS = timeIt(false)
	r.FwdBwdMS = timeIt(true)
	mem := dev.Memory()
	mem.ResetPeaks()
	act := func() memory.Stat { return mem.Stats().Roles[memory.RoleActivation].Requested }
	base, baseAll := act().Current, mem.Stats().Total.Requested.Current
	pass(true, true)
	sync()
	r.ActMiB = float64(act().Peak-base) / (1 << 20)
	r.PeakMiB = float64(mem.Stats().Total.Requested.Peak-baseAll) / (1 << 20)
	flops := 14 * float64(r.B*r.H) * float64(r.T) * float64(r.T) * float64(r.HD) / 2 // 3.5 x 4 B H T² hd, half of it masked
	r.TFLOPS = flops / (r.FwdBwdMS * 1e-3) / 1e12
	return out
}

// attention returns the op a row times: over q, k, v (plain, fused) or
// over one (B, T, 3C) product (fused+split, fused-qkv).
func attention(name string, r *result) func(v []*autograd.Var) *autograd.Var {
	p := r.Dropout
	switch name {
	case "plain":
		return func(v []*autograd.Var) *autograd.Var { return autograd.CausalAttention(v[0], v[1], v[2], p, 7, 0) }
	case "fused":
		return func(v []*autograd.Var) *autograd.Var { return autograd.FusedCausalAttention(v[0], v[1], v[2], p, 7, 0) }
	case "fused-qkv":
		return func(v []*autograd.Var) *autograd.Var { return autograd.FusedCausalAttentionQKV(v[0], r.H, p, 7, 0) }
	}
	// fused+split: the heads split and merged with copies, as nn did
	// before FusedCausalAttentionQKV.
	return func(v []*autograd.Var) *autograd.Var {
		B, T, H, hd := r.B, r.T, r.H, r.HD
		heads := autograd.Contiguous(autograd.Permute(autograd.Reshape(v[0], B, T, 3, H, hd), 2, 0, 3, 1, 4))
		piece := func(i int) *autograd.Var { return autograd.Reshape(autograd.Narrow(heads, 0, i, 1), B, H, T, hd) }
		y := autograd.FusedCausalAttention(piece(0), piece(1), piece(2), p, 7, 0)
		return autograd.Reshape(autograd.Contiguous(autograd.Permute(y, 0, 2, 1, 3)), B, T, H*hd)
	}
}

// finiteErr refuses a row whose outputs were not finite where the
// reference's were (maxErr is then NaN or Inf): the JSON line could not
// hold it, and json's "unsupported value: NaN" named no cause.
func finiteErr(e float64) error {
	if math.IsNaN(e) || math.IsInf(e, 0) {
		return fmt.Errorf("outputs not finite: max relative error %v against the reference", e)
	}
	return nil
}

func maxErr(a, b [][]float64) float64 {
	var worst float64
	for i := range a {
		var num, den float64
		for j := range a[i] {
			num = max(num, math.Abs(a[i][j]-b[i][j]))
			den = max(den, math.Abs(b[i][j]))
		}
		worst = max(worst, num/max(den, 1e-30))
	}
	return worst
}
