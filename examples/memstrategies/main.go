// Command memstrategies trains one GPT shape under each memory strategy
// of the hybrid manager and prints the seed's comparison table: peak
// device memory, tokens/s and the loss after N steps, as text, JSON lines
// and a PNG bar chart.
//
// Strategies (-strategies, comma separated):
//
//	device       every tensor in pooled device memory: a default allocator
//	device-fused the same with every fused kernel: the fused, chunked
//	             output head and loss (nn.HeadLoss) and fused attention
//	             (-hybrid-attention), to tell their saving from the
//	             placement's
//	zerocopy     every tensor in mapped pinned host memory (staging)
//	managed      every tensor in unified memory, no advice
//	hybrid       the hybrid policy (placement by role, spilling past the
//	             budget) with the placement scheduler moving cold tensors
//	             to the offload tier under -budget, the fused head
//	             (-hybrid-head) and fused attention (-hybrid-attention)
//	hybrid-ckpt  hybrid plus activation checkpointing (-hybrid-checkpoint)
//	role         the hybrid policy's placement by role only: no budget,
//	             no scheduler, no checkpointing
//
// Every strategy trains the same model from the same seed on the same
// random tokens at one precision, so identical numerics give the same
// loss (the fused head and attention of the strategies that may use every
// tool compute the same function with other roundings: their losses
// agree to the printed digits on the H200, and bit for bit on the CPU's
// tiny test). The device memory in use is sampled with cuMemGetInfo after every
// allocation of one extra step (so managed pages resident on the GPU
// count), less what was in use before the strategy started; the
// allocator's own device-tier peak is reported beside it.
//
// A flag no strategy of -strategies would use is refused (the hybrid
// strategies' flags without hybrid or hybrid-ckpt, hybrid-ckpt's without
// it, -checkpoint-every without -hybrid-checkpoint blocks,
// -hybrid-offload-keep without -hybrid-offload), and so is -budget 0 or
// off: the hybrid strategies run under a budget. Exit status: 0, 2 for a
// bad flag (a -device that cannot be used too, and a budget's share that
// comes to less than a byte of its memory, before any work), 1 for a
// failure of the run, writing the rows to stdout or the table to stderr
// included.
//
// SIGINT or SIGTERM while -json or -png is written (or while their paths
// are probed, before any work) abandons that write, its temporary file
// removed and the file there before kept, skips the outputs not yet
// written and exits with 130 or 143 (128 + the signal), as generate does
// for its -save; one that lands as a write ends leaves that file whole
// and stops after it. Outside those writes (while the strategies train,
// or between the two) a signal ends the process at once, as before: no
// file is being written then, so none is left half done.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-ml/strata/internal/atomicfile"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

type options struct {
	config, device, precision, strategies string
	batch, steps, warmup                  int
	budget, hybridCkpt, hybridHead        string
	hybridAttention                       string
	ckptEvery                             int
	hybridOffload                         bool
	hybridKeep                            string
	keepN                                 int // -hybrid-offload-keep as a count; -1 for auto
	ckptBudget                            string
	lr                                    float64
	seed                                  uint64
	jsonOut, pngOut                       string
	plan, planEvery                       bool
	attention                             string
	overlap, pipeline                     bool
	// testWriting (tests) runs as the write of -json or -png (flag)
	// starts, inside its cli.Interruptible: ctx is the write's.
	testWriting func(ctx context.Context, flag string)
}

// maxBatchTokens bounds -batch times the context: 16M tokens a step, far
// past what any device trains in one step.
const maxBatchTokens = 1 << 24

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("memstrategies", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.config, "config", "gpt2", "model shape: "+strings.Join(configNames(), ", "))
	fs.StringVar(&o.device, "device", "auto", "cpu, cuda, cuda:N or auto")
	fs.StringVar(&o.precision, "precision", "fp32", "fp32, tf32, fp16 or bf16 (the same for every strategy)")
	fs.StringVar(&o.strategies, "strategies", "device,zerocopy,managed,hybrid,hybrid-ckpt", "comma-separated strategies: device, device-fused, zerocopy, managed, hybrid, hybrid-ckpt, role")
	fs.IntVar(&o.batch, "batch", 0, "batch size (0: the config's)")
	fs.IntVar(&o.steps, "steps", 10, "timed training steps per strategy")
	fs.IntVar(&o.warmup, "warmup", 3, fmt.Sprintf("untimed steps first (the scheduler settles in them); raised to %d, for every strategy, when -strategies has hybrid (its placement chooses its checkpointing in them)", hybridWarmup))
	fs.StringVar(&o.budget, "budget", "auto", "device budget of the hybrid strategies: a size (4GiB), a share of the device (50%, 0.5), or auto: half the device strategy's measured peak")
	fs.StringVar(&o.hybridCkpt, "hybrid-checkpoint", "selective", "checkpointing of hybrid-ckpt: selective or blocks")
	fs.IntVar(&o.ckptEvery, "checkpoint-every", 1, "with blocks, checkpoint every k-th block")
	fs.StringVar(&o.ckptBudget, "hybrid-ckpt-budget", "same", "hybrid-ckpt's device budget: same (-budget's), off, or a size or share as -budget takes")
	fs.BoolVar(&o.hybridOffload, "hybrid-offload", false, "hybrid-ckpt: move what the checkpointed blocks hold to pinned host memory between the passes (nn.Checkpointing.Offload)")
	fs.StringVar(&o.hybridKeep, "hybrid-offload-keep", "auto", "with -hybrid-offload: how many of the last checkpointed blocks of a forward pass keep what they hold on the device (0: none); auto: 2, then more while the row's budget has room and the measured step gets faster (nn.Placement)")
	fs.StringVar(&o.hybridHead, "hybrid-head", "fused", "output head and loss of the hybrid strategies: fused (chunked, never all the logits) or full")
	fs.StringVar(&o.hybridAttention, "hybrid-attention", "fused", "attention of the hybrid strategies and device-fused: fused (FlashAttention-2, no (B, H, T, T) matrix: tensor cores under fp16/bf16 and tf32, and under fp32 at heads up to 64 (3xTF32); float32 FMA at wider fp32 heads) or same (-attention, as every other strategy)")
	fs.BoolVar(&o.overlap, "overlap", false, "the hybrid strategies run AdamW's update on the GPU's side stream while the next forward pass starts (nn.AdamW.Overlap; off by default: under a tight budget the gradients it holds through the forward pass cost more offloading than it hides, bench/results/hybrid-2026-12-02-s10.md)")
	fs.BoolVar(&o.pipeline, "pipeline", false, "the hybrid strategies run AdamW's update on the GPU's side stream a layer at a time, the next forward pass waiting for each layer's update only, and give each layer's gradients back as soon as it is updated (nn.AdamW.Pipeline; not with -overlap)")
	fs.StringVar(&o.attention, "attention", "auto", "attention: plain, fused, or auto (fused on CUDA where its kernels run on tensor cores: fp16, bf16, tf32, and fp32 at heads up to 64; plain elsewhere, as train-gpt) of the device, zerocopy, managed and role strategies; -hybrid-attention sets the others'")
	fs.Float64Var(&o.lr, "lr", 3e-4, "AdamW learning rate")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed (model and data)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the JSON lines to this file")
	fs.StringVar(&o.pngOut, "png", "memstrategies.png", "bar chart of peak device memory and tokens/s (empty: none)")
	fs.BoolVar(&o.plan, "plan", false, "print the placement scheduler's plan after the warm-up")
	fs.BoolVar(&o.planEvery, "plan-every", false, "print the placement scheduler's plan after every step")
	if err := cli.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	// amp.ParsePrecision and nn's parsers read their names in any case:
	// the flags' canonical (lower-case) names, for the comparisons below
	// and the rows' JSON.
	for _, s := range []*string{&o.precision, &o.attention, &o.hybridCkpt, &o.hybridHead} {
		*s = strings.ToLower(*s)
	}
	if fs.NArg() > 0 {
		return nil, cli.UsageHint(fs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	switch {
	case o.batch < 0:
		return nil, fmt.Errorf("-batch %d: want >= 0", o.batch)
	case o.steps <= 0:
		return nil, fmt.Errorf("-steps %d: want > 0", o.steps)
	case o.warmup < 0:
		return nil, fmt.Errorf("-warmup %d: want >= 0", o.warmup)
	case !(o.lr > 0) || o.lr > 1:
		return nil, fmt.Errorf("-lr %v: want a number in (0, 1]", o.lr)
	case o.ckptEvery < 1:
		return nil, fmt.Errorf("-checkpoint-every %d: want >= 1", o.ckptEvery)
	case o.overlap && o.pipeline:
		return nil, fmt.Errorf("-pipeline: not with -overlap (choose one way of overlapping the update)")
	}
	o.keepN = -1
	if o.hybridKeep != "auto" {
		n, err := strconv.Atoi(o.hybridKeep)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-hybrid-offload-keep %q: want auto or a count of blocks, 0 or more", o.hybridKeep)
		}
		o.keepN = n
	}
	cfg, err := nn.LookupGPTConfig(o.config)
	if err != nil {
		return nil, fmt.Errorf("-config: %w", err)
	}
	// A step's token ids and targets are host slices of batch x context
	// int32s, made before any tensor: past maxBatchTokens they would
	// crash the Go runtime (out of memory) instead of failing.
	if o.batch > maxBatchTokens/cfg.Context {
		return nil, fmt.Errorf("-batch %d: %s's batch holds at most %d rows of %d tokens (%d tokens)", o.batch, o.config, maxBatchTokens/cfg.Context, cfg.Context, maxBatchTokens)
	}
	if _, err := parsePrecision(o.precision); err != nil {
		return nil, err
	}
	if _, err := nn.ParseAttention(o.attention); err != nil && o.attention != "auto" {
		return nil, fmt.Errorf("-attention %q: want plain, fused or auto", o.attention)
	}
	if m, err := nn.ParseCheckpointMode(o.hybridCkpt); err != nil || m == nn.CheckpointNone {
		return nil, fmt.Errorf("-hybrid-checkpoint %q: want selective or blocks", o.hybridCkpt)
	}
	if o.hybridAttention != "fused" && o.hybridAttention != "same" {
		return nil, fmt.Errorf("-hybrid-attention %q: want fused or same", o.hybridAttention)
	}
	if _, err := nn.ParseHeadLoss(o.hybridHead); err != nil {
		return nil, fmt.Errorf("-hybrid-head: %w", err)
	}
	names, err := strategyList(o.strategies)
	if err != nil {
		return nil, err
	}
	if err := cli.CheckDevice(o.device); err != nil {
		return nil, err
	}
	// -budget auto is half the device strategy's peak: the device
	// strategy must run before the hybrid ones that use it.
	for i, name := range names {
		flagName, budget := "-budget", o.budget
		if name == "hybrid-ckpt" && o.ckptBudget != "same" {
			flagName, budget = "-hybrid-ckpt-budget", o.ckptBudget
		}
		if strings.HasPrefix(name, "hybrid") && budget == "auto" && !slices.Contains(names[:i], "device") {
			return nil, fmt.Errorf("%s auto (half the device strategy's peak) needs the device strategy before %s in -strategies, or a size", flagName, name)
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := checkIgnored(o, names, set); err != nil {
		return nil, err
	}
	if o.ckptEvery > cfg.Layers { // the every-th, 2·every-th, ... block: none
		return nil, fmt.Errorf("-checkpoint-every %d: more than the %d blocks of -config %s (no block would be checkpointed)", o.ckptEvery, cfg.Layers, o.config)
	}
	if o.budget != "auto" {
		b, err := parseBudget(o.budget, 1<<40)
		if err != nil {
			return nil, budgetError(err)
		}
		if b == 0 {
			return nil, fmt.Errorf("-budget %s: the hybrid strategies run under a budget: give a size (4GiB), a share (50%%) or auto (hybrid-ckpt without one: -hybrid-ckpt-budget off; placement by role without one: the role strategy)", o.budget)
		}
	}
	if o.ckptBudget != "same" && o.ckptBudget != "auto" {
		if _, err := parseBudget(o.ckptBudget, 1<<40); err != nil {
			return nil, fmt.Errorf("-hybrid-ckpt-budget: %w", err)
		}
	}

	// atomicfile.CheckWritable refuses what the atomic write at the end
	// would (a directory, a named pipe, a device, a dangling link) without
	// opening the path: opening a named pipe for writing blocks until a
	// reader comes. Its probe creates and removes a file: a signal waits
	// for it (cli.Interruptible) so as to leave none.
	if err := cli.Interruptible("checking the outputs can be written", func(context.Context) error {
		if o.pngOut != "" {
			if err := atomicfile.CheckWritable(o.pngOut); err != nil {
				return fmt.Errorf("-png: %w", err)
			}
		}
		if o.jsonOut != "" {
			if o.pngOut != "" && cli.SamePath(o.jsonOut, o.pngOut) {
				return fmt.Errorf("-json %s: the same file as -png", o.jsonOut)
			}
			if err := atomicfile.CheckWritable(o.jsonOut); err != nil {
				return fmt.Errorf("-json: %w", err)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return o, nil
}

// budgetError is -budget's error for ParseBudget's err: its forms end in
// off, which -budget refuses.
func budgetError(err error) error {
	return fmt.Errorf("-budget: %s", strings.Replace(err.Error(), ", or off", ", or auto", 1))
}

// checkBudgets reads -budget and -hybrid-ckpt-budget against dev's memory
// before any strategy runs, as runStrategy will: parse checked their
// forms against 1 TiB, and a share of a smaller device may come to less
// than a byte. Its error is a bad flag's (a cli.UsageError, status 2).
func checkBudgets(o *options, dev tensor.Device) error {
	_, total, _ := dev.Memory().Pool(memory.TierDevice).Backend().Info()
	if o.budget != "auto" {
		if _, err := parseBudget(o.budget, total); err != nil {
			return cli.UsageError{Err: budgetError(err)}
		}
	}
	if o.ckptBudget != "same" && o.ckptBudget != "auto" {
		if _, err := parseBudget(o.ckptBudget, total); err != nil {
			return cli.UsageError{Err: fmt.Errorf("-hybrid-ckpt-budget: %w", err)}
		}
	}
	return nil
}

// checkIgnored refuses a flag given (set) that no strategy of names
// would use: the hybrid strategies' flags without hybrid or hybrid-ckpt,
// hybrid-ckpt's without it, -checkpoint-every without -hybrid-checkpoint
// blocks, -hybrid-offload-keep without -hybrid-offload, -budget when
// only hybrid-ckpt runs under a budget of its own, -hybrid-attention
// without a strategy that may use every tool, and -attention when every
// strategy has -hybrid-attention's.
func checkIgnored(o *options, names []string, set map[string]bool) error {
	has := func(n ...string) bool {
		for _, name := range n {
			if slices.Contains(names, name) {
				return true
			}
		}
		return false
	}
	hybrid := has("hybrid", "hybrid-ckpt")
	for _, c := range []struct {
		flag, why string
		used      bool
	}{
		{"budget", "the hybrid strategies' budget: -strategies has neither hybrid nor hybrid-ckpt", hybrid},
		{"budget", "hybrid-ckpt has its own budget (-hybrid-ckpt-budget) and -strategies has no hybrid", has("hybrid") || o.ckptBudget == "same"},
		{"overlap", "the hybrid strategies' optimizer: -strategies has neither hybrid nor hybrid-ckpt", hybrid},
		{"pipeline", "the hybrid strategies' optimizer: -strategies has neither hybrid nor hybrid-ckpt", hybrid},
		{"plan", "the placement scheduler's plan: only the hybrid strategies have one, and -strategies has neither hybrid nor hybrid-ckpt", hybrid},
		{"plan-every", "the placement scheduler's plan: only the hybrid strategies have one, and -strategies has neither hybrid nor hybrid-ckpt", hybrid},
		{"hybrid-head", "the hybrid strategies' head: -strategies has neither hybrid nor hybrid-ckpt", hybrid},
		{"hybrid-attention", "the attention of hybrid, hybrid-ckpt and device-fused: -strategies has none of them", has("hybrid", "hybrid-ckpt", "device-fused")},
		{"attention", "every strategy of -strategies has -hybrid-attention's", has("device", "zerocopy", "managed", "role") || o.hybridAttention == "same"},
		{"hybrid-checkpoint", "hybrid-ckpt's checkpointing: -strategies has no hybrid-ckpt", has("hybrid-ckpt")},
		{"hybrid-ckpt-budget", "hybrid-ckpt's budget: -strategies has no hybrid-ckpt", has("hybrid-ckpt")},
		{"hybrid-offload", "hybrid-ckpt's offload: -strategies has no hybrid-ckpt", has("hybrid-ckpt")},
		{"hybrid-offload-keep", "only with -hybrid-offload", o.hybridOffload && has("hybrid-ckpt")},
		{"checkpoint-every", "only with -hybrid-checkpoint blocks, in hybrid-ckpt", o.hybridCkpt == "blocks" && has("hybrid-ckpt")},
	} {
		if set[c.flag] && !c.used {
			return fmt.Errorf("-%s: %s", c.flag, c.why)
		}
	}
	return nil
}

func main() {
	o, err := parse(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "memstrategies:", err)
		code := 2 // a bad flag
		var ex *cli.ExitError
		if errors.As(err, &ex) { // a signal during the probes of -json and -png
			code = ex.Code
		}
		os.Exit(code)
	}
	dev, err := cli.OpenDevice(o.device)
	if err != nil { // a bad flag, before any work
		fmt.Fprintln(os.Stderr, "memstrategies:", err)
		os.Exit(2)
	}
	if err := run(o, dev, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "memstrategies:", err)
		os.Exit(cli.ExitCode(err)) // 2 for a budget the device refuses, before any work; 128 + the signal for an interrupted write
	}
}

// run trains each strategy and writes the JSON lines to stdout and the
// table to stderr, and the -json and -png files. A write to stdout or
// stderr that fails is a failure of the run, reported once the files are
// written: the rows are not lost silently.
func run(o *options, dev tensor.Device, stdout, stderr io.Writer) error {
	out, errOut := &cli.StickyWriter{W: stdout}, &cli.StickyWriter{W: stderr}
	err := runTo(o, dev, out, errOut)
	switch {
	case err != nil:
		return err
	case out.Err != nil:
		return fmt.Errorf("writing the results to stdout: %w", out.Err)
	case errOut.Err != nil:
		return fmt.Errorf("writing the table to stderr: %w", errOut.Err)
	}
	return nil
}

func runTo(o *options, dev tensor.Device, stdout, stderr io.Writer) error {
	if err := checkBudgets(o, dev); err != nil {
		return err
	}
	cfg, _ := nn.LookupGPTConfig(o.config)
	if o.batch == 0 {
		o.batch = cfg.Batch
	}
	names, _ := strategyList(o.strategies)
	if o.attention == "auto" {
		prec, _ := parsePrecision(o.precision)
		o.attention = nn.AutoAttention(dev, prec.Enabled || prec.TF32, cfg.Width/cfg.Heads).String()
	}
	if slices.Contains(names, "hybrid") && o.warmup < hybridWarmup {
		// The hybrid strategy's placement raises its checkpointing while a
		// step does not fit (a step a level), then tries higher levels
		// while tensors stay offloaded (each waits out the scheduler's
		// patience and is timed); every strategy takes as many steps, so
		// that their losses compare.
		o.warmup = hybridWarmup
		fmt.Fprintf(stderr, "memstrategies: %d warm-up steps (the hybrid strategy chooses its checkpointing in them)\n", o.warmup)
	}
	fmt.Fprintf(stderr, "memstrategies: %s (%d parameters), batch %d x %d, %s, %s attention, on %v; %d warm-up + %d timed steps per strategy\n",
		o.config, cfg.NumParams(), o.batch, cfg.Context, o.precision, o.attention, dev, o.warmup, o.steps)
	var rows []result
	var devicePeak int64
	var lines bytes.Buffer // -json's, written once every strategy has run
	for _, name := range names {
		r, err := runStrategy(o, cfg, dev, name, devicePeak, stderr)
		if err != nil {
			return fmt.Errorf("strategy %s: %w", name, err)
		}
		if name == "device" {
			devicePeak = r.PeakDevice
		}
		rows = append(rows, r)
		line, err := json.Marshal(r)
		if err != nil { // a NaN or infinity among the figures
			return fmt.Errorf("strategy %s: its results as JSON: %w", name, err)
		}
		fmt.Fprintln(stdout, string(line))
		fmt.Fprintln(&lines, string(line))
	}
	fmt.Fprint(stderr, "\n"+table(rows))
	if o.jsonOut != "" {
		if err := o.writeOutput("-json", "writing the JSON lines to "+o.jsonOut, func(ctx context.Context) error {
			return atomicfile.Write(ctx, o.jsonOut, func(w io.Writer) error {
				_, err := w.Write(lines.Bytes())
				return err
			})
		}); err != nil {
			return err
		}
	}
	if o.pngOut != "" {
		if err := o.writeOutput("-png", "writing the bar chart to "+o.pngOut, func(ctx context.Context) error {
			return plotRows(ctx, rows, o.pngOut, fmt.Sprintf("%s B%d T%d %s on %v", o.config, o.batch, cfg.Context, o.precision, dev))
		}); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bar chart: %s\n", o.pngOut)
	}
	return nil
}

// writeOutput runs write, the atomic write of the output flag names
// (doing says it for the message), under cli.Interruptible: SIGINT or
// SIGTERM abandons it (no temporary file, the file there before kept)
// and ends the run with 128 + the signal, a *cli.ExitError, which the
// caller returns before any other write starts. Another failure is
// write's error, prefixed with flag.
func (o *options) writeOutput(flag, doing string, write func(ctx context.Context) error) error {
	err := cli.Interruptible(doing, func(ctx context.Context) error {
		if o.testWriting != nil {
			o.testWriting(ctx, flag)
		}
		return write(ctx)
	})
	var ex *cli.ExitError
	if err == nil || errors.As(err, &ex) {
		return err
	}
	return fmt.Errorf("%s: %w", flag, err)
}
