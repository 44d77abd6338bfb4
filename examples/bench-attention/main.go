// Command bench-attention times causal self-attention, forward and
// backward, plain (autograd.CausalAttention: the (B, H, T, T)
// probabilities materialised, recomputed in backward) against fused
// (autograd.FusedCausalAttention, FlashAttention-2), at gpt2's shape by
// default (B 8, H 12, T 1024, hd 64), in each precision asked for. It
// prints one JSON line per row on stdout and a table on stderr. Every row
// also reports the activation peak of the pass and how far the fused
// output and gradients are from the plain ones.
//
//	go run ./examples/bench-attention -device cuda -precision fp32,bf16,fp16
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/tensor"
)

type result struct {
	Device    string  `json:"device"`
	Attention string  `json:"attention"`
	Precision string  `json:"precision"`
	Kernels   string  `json:"kernels"` // cpu, simt (float32 math) or mma (tensor cores)
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
	MaxErr    float64 `json:"max_rel_err_vs_plain"` // output and gradients, relative to each one's largest element
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-attention:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("bench-attention", flag.ContinueOnError)
	device := fs.String("device", "cuda", "cpu, cuda or cuda:N")
	B := fs.Int("B", 8, "batch")
	H := fs.Int("H", 12, "heads")
	T := fs.Int("T", 1024, "sequence length")
	hd := fs.Int("hd", 64, "head size")
	p := fs.Float64("dropout", 0, "dropout on the probabilities")
	iters := fs.Int("iters", 10, "timed iterations (after 2 untimed)")
	precs := fs.String("precision", "fp32,bf16,fp16", "comma-separated: fp32, fp16, bf16 (autocast)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dev, err := tensor.ParseDevice(*device)
	if err != nil {
		return err
	}
	var rows []result
	for _, prec := range strings.Split(*precs, ",") {
		st, err := parsePrecision(prec)
		if err != nil {
			return err
		}
		var plain [][]float64
		for _, fused := range []bool{false, true} {
			r := result{Device: dev.String(), Attention: "plain", Kernels: "gemm+softmax", Precision: prec, B: *B, H: *H, T: *T, HD: *hd, Dropout: *p, Iters: *iters}
			if fused {
				r.Attention = "fused"
				r.Kernels = "simt"
				switch {
				case dev == tensor.CPU():
					r.Kernels = "cpu"
				case st.Enabled && os.Getenv(tensor.EnvAttention) != "simt":
					r.Kernels = "mma"
				}
			}
			var vals [][]float64
			if err := tensor.Try(func() { vals = measure(dev, st, fused, &r) }); err != nil {
				return fmt.Errorf("%s %s: %w", prec, r.Attention, err)
			}
			if fused {
				r.MaxErr = maxErr(vals, plain)
			} else {
				plain = vals
			}
			line, _ := json.Marshal(r)
			fmt.Println(string(line))
			rows = append(rows, r)
		}
	}
	fmt.Fprintf(os.Stderr, "\n| device | precision | attention | kernels | B x H x T x hd | forward ms | fwd+bwd ms | TFLOP/s | peak MiB | activation peak MiB | max rel err vs plain |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(os.Stderr, "| %s | %s | %s | %s | %dx%dx%dx%d | %.3f | %.3f | %.1f | %.1f | %.1f | %.2g |\n",
			r.Device, r.Precision, r.Attention, r.Kernels, r.B, r.H, r.T, r.HD, r.FwdMS, r.FwdBwdMS, r.TFLOPS, r.PeakMiB, r.ActMiB, r.MaxErr)
	}
	return nil
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

// measure times r's configuration and returns the output and the
// gradients of the last pass, for the comparison with plain.
func measure(dev tensor.Device, st amp.State, fused bool, r *result) [][]float64 {
	c := tensor.NewCtx()
	rng := rand.New(rand.NewPCG(1, 2))
	shape := []int{r.B, r.H, r.T, r.HD}
	var xs []*tensor.Tensor // in c, so the ops see c's autocast state
	for range 4 {
		xs = append(xs, c.RandN(dev, tensor.Float32, rng, 1, shape...))
	}
	defer func() {
		for _, x := range xs {
			x.Release()
		}
	}()
	attend := autograd.CausalAttention
	if fused {
		attend = autograd.FusedCausalAttention
	}
	vars := make([]*autograd.Var, 3)
	for i := range vars {
		vars[i] = autograd.Const(xs[i])
		vars[i].SetRequiresGrad(true)
	}
	var out [][]float64
	pass := func(backward, keep bool) {
		c.WithScope(func() {
			var y *autograd.Var
			amp.With(c, st, func() { y = attend(vars[0], vars[1], vars[2], r.Dropout, 7, 0) })
			if !backward {
				return
			}
			loss := autograd.Sum(autograd.Mul(y, autograd.Const(xs[3])), false)
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
		return float64(time.Since(start).Microseconds()) / 1e3 / float64(r.Iters)
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
