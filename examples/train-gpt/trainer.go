package main

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// trainer holds a model, its optimizer and its step function. Its steps
// run in a context of their own (tensor.Ctx), in the precision -precision
// asks for (the autocast state of every forward pass, and a gradient
// scaler that is a no-op except for fp16).
type trainer struct {
	model  *nn.GPT
	params []*nn.Parameter
	opt    *nn.AdamW
	sched  nn.CosineSchedule
	clip   float64
	dev    tensor.Device
	B, T   int
	xs, ys []int32
	// dataTokens is -data's training and held-out token counts and
	// dataSHA256 the hash of its bytes (the run's identity, resume.go);
	// nil and "" for the addition task.
	dataTokens []int
	dataSHA256 string
	c          *tensor.Ctx
	prec       amp.State
	scaler     *amp.GradScaler

	// The data generator (a PCG, whose state the training state saves).
	dataSrc *rand.PCG
	rng     *rand.Rand
	// dataPos is the generator's state after the last batch trained on
	// (what the training state saves); nil: dataSrc's own (no loader).
	dataPos []byte
	// skips counts the steps in a row the gradient scaler skipped;
	// maxSkips of them stop the run.
	skips, maxSkips int
	// placer runs the placement scheduler under -device-budget (nil
	// without) and, under -checkpoint auto, chooses the model's
	// checkpointing level (nn.Placement); showPlan prints its plans
	// (placement.go).
	placer   *nn.Placement
	showPlan bool
	// timer, when set (-bench), marks the phases of every step on the
	// device's queue (phases.go).
	timer *tensor.Timer
	// Data-parallel training (-gpus, dataparallel.go): dp, on the main
	// trainer, runs every step on the ranks; a rank's trainer calls sync
	// after the backward pass (averaging the gradients) and steps altOpt
	// (-zero1's sharded AdamW), when set, in place of opt.
	dp     *dataParallel
	sync   func() error
	altOpt nn.Optimizer
	// graph, under -cuda-graph, is the captured step (graph.go), used
	// from the second step on; graphAuto: -cuda-graph auto, which goes on
	// without the graph when the capture fails.
	graph     *graphStep
	graphAuto bool
}

// newTrainer makes the model and optimizer for batches of o.batch rows of
// T tokens.
func newTrainer(o *options, cfg nn.GPTConfig, dev tensor.Device, T int) (*trainer, error) {
	rng := rand.New(rand.NewPCG(o.seed, 0x5EED))
	model, err := nn.NewGPT(cfg, nn.Options{Device: dev, DType: tensor.Float32, Rng: rng})
	if err != nil {
		return nil, err
	}
	if o.gradDType == "bf16" {
		if err := model.SetBlockGradDType(tensor.BFloat16); err != nil {
			nn.Release(model.Parameters())
			return nil, err
		}
	}
	model.Checkpoint = nn.Checkpointing{Mode: o.ckptMode, Every: o.ckptEvery, Offload: o.ckptOff, OffloadKeep: offloadKeep(o.keepN), KeepWide: o.wideN}
	if o.head == "auto" {
		// On the GPU the fused head is faster (its GEMMs get the padded
		// vocabulary) and holds a chunk of logits instead of all of them;
		// on the CPU the full one is as fast and simpler to inspect.
		o.headLoss = nn.HeadLoss{Fused: dev.Kind() == tensor.KindCUDA}
	}
	model.HeadLoss = o.headLoss
	if o.attention == "auto" {
		o.attn = nn.AutoAttention(dev, o.prec.Enabled || o.prec.TF32, cfg.Width/cfg.Heads)
	}
	model.SetAttention(o.attn)
	ps := model.Parameters()
	opt := nn.NewAdamW(ps, o.lr, o.wd)
	opt.Beta2 = 0.95
	opt.Overlap = o.overlapOpt
	opt.Pipeline, opt.PipelineWidth = o.pipelineOpt, o.pipelineWidth
	if o.pipelineOpt && o.budget != "" {
		// Under a budget AdamW's moments go to host memory, and the
		// pipelined update moves them through a copy ring whose slots
		// are held against the budget: made now, while it has room (off
		// with STRATA_PIPELINE_RING=0).
		if err := tensor.PreparePipelineRing(dev); err != nil {
			fmt.Fprintf(os.Stderr, "no copy ring for the pipelined update (%s): %v; its kernel reads the moments over the bus\n", tensor.EnvPipelineRing, err)
		}
	}
	B := o.batch
	src := rand.NewPCG(o.seed, 0xDA7A)
	var placer *nn.Placement
	if o.sched != nil {
		if placer, err = nn.NewPlacement(o.sched, &model.Checkpoint, o.placementConfig(model)); err != nil {
			nn.Release(ps)
			return nil, err
		}
	}
	t := &trainer{
		model: model, params: ps, opt: opt, clip: o.clip, dev: dev, B: B, T: T,
		c: tensor.NewCtx(), prec: o.prec, scaler: newScaler(o.prec),
		sched: nn.CosineSchedule{Warmup: o.warmup, Total: o.steps, MaxLR: o.lr, MinLR: o.minLR},
		xs:    make([]int32, B*T), ys: make([]int32, B*T),
		dataSrc: src, rng: rand.New(src), maxSkips: max(1, o.maxSkips),
		placer: placer, showPlan: o.placementPlan,
	}
	useGraph, err := o.graphUse(dev, cfg.Dropout)
	if err == nil && useGraph {
		t.graph, err = t.newGraphStep()
		t.graphAuto = o.graph == "auto"
	}
	if err != nil {
		t.release()
		return nil, err
	}
	return t, nil
}

// release frees the model and the optimizer state.
func (t *trainer) release() {
	t.stopDataParallel()
	t.graph.release()
	t.graph = nil
	t.opt.Release()
	nn.Release(t.params)
}

// describeCheckpoint says which blocks -checkpoint and -checkpoint-every
// checkpoint.
func describeCheckpoint(o *options) string {
	switch {
	case o.ckptAuto:
		return "auto (none until a step does not fit the device budget; then the level the placement measures fastest)"
	case o.ckptMode == nn.CheckpointNone:
		return "off"
	}
	s := fmt.Sprintf("%v, every %d blocks", o.ckptMode, o.ckptEvery)
	if o.ckptEvery == 1 {
		s = fmt.Sprintf("%v, every block", o.ckptMode)
	}
	if o.ckptOff {
		s += ", offloaded to host memory between the passes"
	}
	return s
}

// offloadKeep maps -checkpoint-offload-keep (0: none) to
// nn.Checkpointing.OffloadKeep (0: the default, negative: none).
func offloadKeep(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// placementConfig is the placement's: the checkpointing level chosen with
// -checkpoint auto, the offload's keep with -checkpoint-offload-keep auto,
// the wide products kept with -checkpoint-keep-wide auto.
func (o *options) placementConfig(model *nn.GPT) nn.PlacementConfig {
	cfg := nn.PlacementConfig{Auto: o.ckptAuto, Log: placementLog{}}
	if o.keepAuto {
		cfg.OffloadRegions = model.OffloadRegions
	}
	if o.wideAuto {
		cfg.WideRegions = model.WideRegions
	}
	return cfg
}

// newScaler is amp.ScalerFor (tests: a scaler that skips every step).
var newScaler = amp.ScalerFor
