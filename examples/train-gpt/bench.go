package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"time"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// benchResult is the JSON line -bench prints.
type benchResult struct {
	Config    string             `json:"config"`
	Policy    string             `json:"policy"`
	Precision string             `json:"precision"`
	Attention string             `json:"attention"`
	Head      string             `json:"head"`
	Skipped   int                `json:"skipped_steps"` // timed fp16 steps skipped by the gradient scaler
	Ckpt      string             `json:"checkpoint"`    // in the timed steps (under -checkpoint auto, the placement's choice)
	CkptEvery int                `json:"checkpoint_every"`
	Budget    string             `json:"device_budget,omitempty"`
	Margin    float64            `json:"budget_margin,omitempty"` // -budget-margin (0: the scheduler's default)
	Spills    int64              `json:"timed_spills"`            // allocations that spilled to the offload tier in the timed steps
	Overlap   bool               `json:"optimizer_overlapped"`
	Pipelined bool               `json:"optimizer_pipelined"`
	PipeWidth int                `json:"pipeline_width,omitempty"`
	GradDType string             `json:"grad_dtype"`
	Device    string             `json:"device"`
	Backend   string             `json:"backend"`
	Threads   int                `json:"threads"`
	Params    int                `json:"params"`
	Batch     int                `json:"batch"`
	Context   int                `json:"context"`
	Steps     int                `json:"steps"`
	TokS      float64            `json:"tok_s"`
	StepMS    float64            `json:"step_ms"`
	PeakBytes int64              `json:"peak_bytes"`
	PeakMiB   float64            `json:"peak_mib"`
	Reserved  int64              `json:"peak_reserved_bytes"`
	TierPeaks map[string]float64 `json:"peak_mib_by_tier"`
	RolePeaks map[string]float64 `json:"peak_mib_by_role"`
	ActPeak   int64              `json:"peak_activation_bytes"`
	Fragment  float64            `json:"fragmentation"`         // 1 - peak allocated / peak reserved (GMLake's measure)
	Loss      *float64           `json:"loss"`                  // null: the last step's loss was not finite (a step the fp16 scaler skipped)
	FlopsTok  float64            `json:"model_flops_per_token"` // flopsPerToken
	MFU       float64            `json:"mfu,omitempty"`         // model FLOPs/s over the GPU's dense peak for the precision
	GPU       string             `json:"gpu,omitempty"`
	Launches  float64            `json:"kernel_launches_per_step"` // queued by the host
	// GraphKernels is the kernels each replay of the captured step runs
	// (-cuda-graph; 0 without a graph), launched by one graph launch.
	GraphKernels int     `json:"graph_kernels_per_step"`
	Driver       float64 `json:"driver_calls_per_step"`
	// PagesMapped and Syncs are the timed steps' page mappings and device
	// synchronisations of expandable segments (memory.Usage), a step:
	// steady training makes none.
	PagesMapped float64 `json:"pages_mapped_per_step"`
	Syncs       float64 `json:"syncs_per_step"`
	// Phases is a timed step's phases on the device and on the host
	// (tensor.Timer's marks, phases.go): a device phase much longer than
	// its kernels is the device waiting for the host.
	Phases []phaseTime `json:"phases,omitempty"`
}

// randomRun is a trainer fed random tokens at a constant learning rate:
// what -bench times and -memory-trace records.
type randomRun struct {
	*trainer
	data randomData
	rng  *rand.Rand
}

func newRandomRun(o *options, cfg nn.GPTConfig, dev tensor.Device) (*randomRun, error) {
	tr, err := newTrainer(o, cfg, dev, cfg.Context)
	if err != nil {
		return nil, err
	}
	tr.sched = nn.CosineSchedule{MaxLR: o.lr, MinLR: o.lr, Total: 1}
	return &randomRun{trainer: tr, data: randomData{vocab: cfg.Vocab}, rng: rand.New(rand.NewPCG(o.seed, 0xBE9C))}, nil
}

// step draws a batch (host memory only) and trains on it.
func (r *randomRun) step(it int) (float64, error) {
	r.data.batch(r.rng, r.xs, r.ys, r.B, r.T)
	return r.trainer.step(it)
}

func bench(o *options, cfg nn.GPTConfig, dev tensor.Device) error {
	tr, err := newRandomRun(o, cfg, dev)
	if err != nil {
		return err
	}
	// The captured step's blocks are allocated once, when it is captured
	// (a warm-up step), and its replays allocate nothing: with a graph the
	// peaks run from before the warm-up, whose steps (the first eager, the
	// capture) allocate what a step does, so the peak is the step's.
	dev.Memory().ResetPeaks()
	for it := range o.benchWarm {
		if _, err := tr.step(it); err != nil {
			return err
		}
	}
	if err := dev.Synchronize(); err != nil {
		return err
	}
	if tr.placer != nil && !tr.placer.Decided() {
		fmt.Fprintf(os.Stderr, "the placement is still choosing the checkpointing after %d warm-up steps: the timed steps include its trials (raise -bench-warmup)\n", o.benchWarm)
	}
	if tr.graph == nil || tr.graph.g == nil {
		dev.Memory().ResetPeaks()
	}
	spills := dev.Memory().Stats().Spills.Count
	// The timed steps' skips: the warm-up's (the scale backs off from
	// 65536 at the start) are no part of the tok/s.
	skipped := tr.scaler.Skipped()
	var loss float64
	launches, calls := tensor.CUDALaunches(), tensor.CUDADriverCalls()
	before := dev.Memory().Stats().Total
	timer := tensor.NewTimer(dev)
	defer timer.Close()
	tr.timer = timer
	start := time.Now()
	for it := range o.steps {
		if loss, err = tr.step(it); err != nil {
			return err
		}
	}
	if err := dev.Synchronize(); err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	tr.timer = nil
	if on, err := tensor.PipelineRingState(dev); on || err != nil {
		fmt.Fprintf(os.Stderr, "pipelined update's copy ring (%s): on %v, error %v\n", tensor.EnvPipelineRing, on, err)
	}
	if tl, err := tensor.PipelineTrace(dev); err != nil {
		return err
	} else if tl != "" {
		fmt.Fprintf(os.Stderr, "pipelined update's timeline (%s), the last whole step:\n%s", tensor.EnvPipelineTrace, tl)
	}
	phases, err := phaseTimes(timer, o.steps)
	if err != nil {
		return err
	}
	st := dev.Memory().Stats()
	r := benchResult{
		Config: o.config, Policy: o.policy, Precision: o.precision, Attention: o.attn.String(), Head: o.headLoss.String(), Skipped: tr.scaler.Skipped() - skipped, Ckpt: tr.model.Checkpoint.Mode.String(), CkptEvery: max(tr.model.Checkpoint.Every, 1), Budget: o.budget, Margin: o.budgetMargin, Overlap: o.overlapOpt, Pipelined: o.pipelineOpt, PipeWidth: o.pipelineWidth, GradDType: o.gradDType, Device: dev.String(), Backend: tensor.CPUBackendInfo(), Threads: runtime.GOMAXPROCS(0),
		Params: nn.CountParams(tr.params), Batch: tr.B, Context: tr.T, Steps: o.steps,
		TokS: float64(tr.B*tr.T*o.steps) / el, StepMS: 1000 * el / float64(o.steps),
		PeakBytes: st.Total.Allocated.Peak, PeakMiB: float64(st.Total.Allocated.Peak) / (1 << 20),
		Reserved: st.Total.Reserved.Peak, ActPeak: st.Roles[memory.RoleActivation].Allocated.Peak,
		Launches:    float64(tensor.CUDALaunches()-launches) / float64(o.steps),
		Driver:      float64(tensor.CUDADriverCalls()-calls) / float64(o.steps),
		PagesMapped: float64(st.Total.PagesMapped-before.PagesMapped) / float64(o.steps),
		Syncs:       float64(st.Total.Syncs-before.Syncs) / float64(o.steps),
		TierPeaks:   map[string]float64{}, RolePeaks: map[string]float64{},
		Spills: st.Spills.Count - spills,
		Phases: phases,
	}
	if finite(loss) { // JSON has no NaN
		r.Loss = &loss
	}
	r.FlopsTok = flopsPerToken(cfg, r.Params)
	if model := tensor.DeviceModel(dev); model != "cpu" {
		r.GPU = model
		if peak := peakFLOPS(model, o.precision); peak > 0 {
			r.MFU = r.FlopsTok * r.TokS / peak
		}
	}
	if tr.graph != nil && tr.graph.g != nil {
		r.GraphKernels = tr.graph.g.Kernels()
	}
	if st.Total.Reserved.Peak > 0 {
		r.Fragment = 1 - float64(st.Total.Allocated.Peak)/float64(st.Total.Reserved.Peak)
	}
	for t := range memory.NumTiers {
		if p := st.Tiers[t].Allocated.Peak; p > 0 {
			r.TierPeaks[t.String()] = float64(p) / (1 << 20)
		}
	}
	for ro := range memory.NumRoles {
		if p := st.Roles[ro].Allocated.Peak; p > 0 {
			r.RolePeaks[ro.String()] = float64(p) / (1 << 20)
		}
	}
	mfu := "-"
	if r.MFU > 0 {
		mfu = fmt.Sprintf("%.1f%%", 100*r.MFU)
	}
	prec := r.Precision
	if r.GradDType != "fp32" {
		prec += ", " + r.GradDType + " gradients"
	}
	fmt.Fprintf(os.Stderr, "\n| config | device | precision | attention | head | checkpoint | params | batch x context | tokens/s | MFU | step ms | peak MiB | activation peak MiB | loss |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(os.Stderr, "| %s | %s | %s | %s | %s | %s/%d | %d | %d x %d | %.0f | %s | %.1f | %.1f | %.1f | %.4f |\n\n", r.Config, r.Device, prec, r.Attention, r.Head, r.Ckpt, r.CkptEvery, r.Params, r.Batch, r.Context, r.TokS, mfu, r.StepMS, r.PeakMiB, float64(r.ActPeak)/(1<<20), loss)
	printPhases(os.Stderr, r.Phases)
	if prof := tensor.CUDAProfile(); prof != "" {
		fmt.Fprintf(os.Stderr, "kernel profile of the %d timed steps (%s):\n%s\n", o.steps, tensor.EnvCUDAProfile, prof)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("the results as JSON: %w", err)
	}
	if _, err := fmt.Fprintln(stdout, string(b)); err != nil {
		return fmt.Errorf("writing the results to stdout: %w", err)
	}
	return nil
}
