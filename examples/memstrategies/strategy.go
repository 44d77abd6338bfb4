package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/strata-ml/strata/amp"
	"github.com/strata-ml/strata/autograd"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

var strategyNames = []string{"device", "device-fused", "zerocopy", "managed", "hybrid", "hybrid-ckpt", "role"}

func strategyList(s string) ([]string, error) {
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(strategyNames, n) {
			return nil, fmt.Errorf("-strategies: unknown strategy %q (want some of %s)", n, strings.Join(strategyNames, ", "))
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("-strategies: %q twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}

func configNames() []string { return nn.GPTConfigNames() }

func parsePrecision(s string) (amp.State, error) {
	st, err := amp.ParsePrecision(s)
	if err != nil {
		return st, fmt.Errorf("-precision %q: want fp32, tf32, fp16 or bf16", s)
	}
	return st, nil
}

func parseBudget(s string, whole int64) (int64, error) { return memory.ParseBudget(s, whole) }

// result is one strategy's row: a JSON line.
type result struct {
	Strategy   string             `json:"strategy"`
	Tools      string             `json:"tools"`
	Config     string             `json:"config"`
	Precision  string             `json:"precision"`
	Attention  string             `json:"attention"`
	Device     string             `json:"device"`
	Batch      int                `json:"batch"`
	Context    int                `json:"context"`
	Steps      int                `json:"steps"`
	TokS       float64            `json:"tok_s"`
	StepMS     float64            `json:"step_ms"`
	PeakDevice int64              `json:"peak_device_bytes"` // sampled (cuMemGetInfo) on a GPU, else the device tier's peak reserved
	PeakMiB    float64            `json:"peak_device_mib"`
	Sampled    bool               `json:"sampled"` // PeakDevice is cuMemGetInfo's
	Samples    int                `json:"samples"` // cuMemGetInfo calls in the sampled step
	TierPeaks  map[string]float64 `json:"peak_reserved_mib_by_tier"`
	Budget     int64              `json:"budget_bytes"`
	Spills     int64              `json:"spilled_allocations"`
	SpillBytes int64              `json:"spilled_bytes"`
	Migrated   int64              `json:"migrated_bytes"`
	// OptMS is the optimizer update's time (clipped gradients to updated
	// weights, synchronised), averaged over the updates the timed steps
	// ran (a step the fp16 loss scaler skips runs none; 0 when none ran);
	// OffloadBytes the optimizer state in
	// the offload tier after the timed steps, and LinkGBs what the update
	// moved over the bus a second (reading and writing it) against the
	// 55 GB/s of pinned host-to-device copies.
	OptMS        float64 `json:"optimizer_ms"`
	Overlap      bool    `json:"optimizer_overlapped"` // the update ran beside the next forward pass (OptMS is then its own time, from one more step)
	Pipelined    bool    `json:"optimizer_pipelined"`  // the same, a layer at a time (nn.AdamW.Pipeline)
	OffloadBytes int64   `json:"offloaded_optimizer_bytes"`
	LinkGBs      float64 `json:"link_gb_s"`
	Checkpoint   string  `json:"checkpoint"`        // after the warm-up
	Decided      bool    `json:"placement_decided"` // the placement chose its checkpointing within the warm-up
	TimedSpills  int64   `json:"timed_spills"`      // spills in the timed steps (the rest are the warm-up's)
	Loss         float64 `json:"loss"`
}

// fusedAttention is the attention of the strategies that may use every
// tool (device-fused, hybrid, hybrid-ckpt): fused under -hybrid-attention
// fused, noted in tools when it differs from the rest's, else attn.
func (o *options) fusedAttention(attn nn.Attention, tools *[]string) nn.Attention {
	if o.hybridAttention != "fused" {
		return attn
	}
	if attn != nn.AttentionFused {
		*tools = append(*tools, "fused attention")
	}
	return nn.AttentionFused
}

// schedPatience is the hybrid strategies' scheduler's Patience (the
// default).
const schedPatience = 3

// hybridWarmup is the warm-up the hybrid strategy needs at most: two
// steps for each level raised to fit (the first at a level is not
// judged), then, for each level tried, the scheduler's patience, two
// steps to settle and nn.Placement's timed steps.
var hybridWarmup = 2*len(nn.CheckpointLevels) + (len(nn.CheckpointLevels)-1)*(schedPatience+2+3)

// indent writes the placement's lines indented, as the table's notes.
type indent struct{ w io.Writer }

func (i indent) Write(b []byte) (int, error) {
	_, err := fmt.Fprintf(i.w, "  %s", b)
	return len(b), err
}

// runStrategy trains a fresh model under strategy name; devicePeak is the
// device strategy's sampled peak (for -budget auto), 0 before it ran.
func runStrategy(o *options, cfg nn.GPTConfig, dev tensor.Device, name string, devicePeak int64, stderr io.Writer) (result, error) {
	m := dev.Memory()
	prec, _ := parsePrecision(o.precision)
	attn, _ := nn.ParseAttention(o.attention)
	r := result{Strategy: name, Config: o.config, Precision: o.precision, Attention: o.attention, Device: dev.String(), Batch: o.batch, Context: cfg.Context, Steps: o.steps, TierPeaks: map[string]float64{}}

	var policy memory.Policy
	ckpt := nn.Checkpointing{}
	auto := false // nn.Placement chooses the checkpointing
	overlap := false
	pipeline := false // both run the update beside the next forward pass
	head := nn.HeadLoss{}
	var tools []string
	switch name {
	case "device":
		policy = memory.SingleTierPolicy(memory.TierDevice)
		tools = []string{"device memory only"}
	case "device-fused":
		policy = memory.SingleTierPolicy(memory.TierDevice)
		head = nn.HeadLoss{Fused: true}
		tools = []string{"device memory only", "fused head"}
		attn = o.fusedAttention(attn, &tools)
	case "zerocopy":
		policy = memory.SingleTierPolicy(memory.TierStaging)
		tools = []string{"mapped pinned host memory only"}
	case "managed":
		policy = memory.SingleTierPolicy(memory.TierManaged)
		tools = []string{"unified memory only"}
	case "role":
		policy = memory.HybridPolicy()
		policy.Spill = false
		tools = []string{"placement by role"}
	case "hybrid", "hybrid-ckpt":
		policy = memory.HybridPolicy()
		tools = []string{"placement by role", "access-driven scheduler", "spill to offload"}
		if name == "hybrid" {
			auto = true
			tools = append(tools, "checkpointing raised to fit, then chosen by measured step time (nn.Placement)")
		}
		if o.overlap {
			overlap = true
			tools = append(tools, "optimizer update overlapped with the next forward pass")
		}
		if o.pipeline {
			pipeline = true
			tools = append(tools, "optimizer update pipelined a layer at a time with the next forward pass")
		}
		if o.hybridHead == "fused" {
			head = nn.HeadLoss{Fused: true}
			tools = append(tools, "fused head")
		}
		attn = o.fusedAttention(attn, &tools)
		if name == "hybrid-ckpt" {
			mode, _ := nn.ParseCheckpointMode(o.hybridCkpt)
			ckpt = nn.Checkpointing{Mode: mode, Every: o.ckptEvery, Offload: o.hybridOffload, OffloadKeep: o.keepN}
			switch {
			case o.keepN == 0:
				ckpt.OffloadKeep = -1 // none kept
			case o.keepN < 0:
				ckpt.OffloadKeep = 0 // 2, then as the budget has room
			}
			tools = append(tools, "checkpointing "+ckpt.String())
		}
		budget := o.budget
		if name == "hybrid-ckpt" && o.ckptBudget != "same" {
			budget = o.ckptBudget
		}
		switch {
		case budget != "auto":
			_, total, _ := m.Pool(memory.TierDevice).Backend().Info()
			b, err := parseBudget(budget, total)
			if err != nil {
				return r, err
			}
			r.Budget = b
		case devicePeak > 0:
			r.Budget = devicePeak / 2
		default:
			return r, fmt.Errorf("-budget auto needs the device strategy to run first")
		}
	}
	r.Tools = strings.Join(tools, ", ")
	r.Attention = attn.String()
	if err := m.EmptyCache(); err != nil {
		return r, err
	}
	m.ResetPeaks()
	m.SetPolicy(policy)
	if err := m.SetLimit(memory.TierDevice, r.Budget); err != nil {
		return r, err
	}
	defer func() { _ = m.SetLimit(memory.TierDevice, 0); _ = m.EmptyCache() }()
	m.OnSpill(func(e memory.SpillEvent) { fmt.Fprintln(stderr, "  "+e.String()) })
	before := m.Stats()

	rng := rand.New(rand.NewPCG(o.seed, 0x5EED))
	model, err := nn.NewGPT(cfg, nn.Options{Device: dev, DType: tensor.Float32, Rng: rng})
	if err != nil {
		return r, err
	}
	model.Checkpoint = ckpt
	var place *nn.Placement
	if strings.HasPrefix(name, "hybrid") {
		sched, err := m.NewScheduler(memory.SchedulerConfig{Budget: r.Budget, Patience: schedPatience})
		if err != nil {
			return r, err
		}
		defer sched.Close()
		// hybrid chooses its checkpointing (nn.Placement); hybrid-ckpt
		// keeps the one it was given.
		pc := nn.PlacementConfig{Auto: auto, Log: indent{stderr}}
		if o.keepN < 0 && r.Budget > 0 {
			pc.OffloadRegions = model.OffloadRegions // the offload's keep, chosen under the budget
		}
		if r.Budget > 0 {
			pc.WideRegions = model.WideRegions // the selective mode's wide products kept, chosen under the budget
		}
		if place, err = nn.NewPlacement(sched, &model.Checkpoint, pc); err != nil {
			return r, err
		}
	}
	model.HeadLoss = head
	model.SetAttention(attn)
	ps := model.Parameters()
	defer nn.Release(ps)
	opt := nn.NewAdamW(ps, o.lr, 0.1)
	opt.Beta2 = 0.95
	opt.Overlap, opt.Pipeline = overlap, pipeline
	defer opt.Release()
	scaler := amp.ScalerFor(prec)
	c := tensor.NewCtx()
	data := rand.New(rand.NewPCG(o.seed, 0xDA7A))
	xs, ys := make([]int32, o.batch*cfg.Context), make([]int32, o.batch*cfg.Context)

	warmup := o.warmup
	var optTime time.Duration
	optTimed := 0    // updates timed: a step the scaler skips has none
	timeOpt := false // synchronize around the optimizer step and time it
	var lastPlan memory.Plan
	step := func() (loss float64, err error) {
		for i := range xs {
			xs[i] = int32(data.IntN(cfg.Vocab))
			ys[i] = int32(data.IntN(cfg.Vocab))
		}
		if e := tensor.Try(func() {
			c.WithScope(func() {
				var x, y *tensor.Tensor
				c.WithRole(memory.RoleStaging, func() {
					x = c.FromInt32s(dev, xs, o.batch, cfg.Context)
					y = c.FromInt32s(dev, ys, o.batch, cfg.Context)
				})
				var l *autograd.Var
				amp.With(c, prec, func() { l = model.Loss(x, y) })
				if s := scaler.LossScale(); s != 1 {
					err = l.BackwardWith(c.Full(dev, tensor.Float32, s))
				} else {
					err = l.Backward()
				}
				if err != nil {
					return
				}
				loss = l.Item()
				gs := make([]*tensor.Tensor, len(ps))
				for i, p := range ps {
					gs[i] = p.Grad
				}
				ok := scaler.Unscale(gs)
				scaler.Update()
				if ok {
					if _, err = nn.ClipGradNorm(ps, 1); err == nil { // reads the norm: the device is idle after it
						t0 := time.Now()
						if err = opt.Step(); err == nil && timeOpt {
							err = dev.Synchronize()
							optTime += time.Since(t0)
							optTimed++
						}
					}
				}
				nn.ZeroGrad(ps)
			})
		}); e != nil {
			err = e
		}
		if err == nil && place != nil {
			lastPlan, err = place.Step()
			if err == nil && (o.planEvery && lastPlan.Step <= warmup+o.steps || o.plan && lastPlan.Step == warmup) {
				fmt.Fprintln(stderr, lastPlan.String())
			}
		}
		return loss, err
	}

	for range warmup {
		if _, err := step(); err != nil {
			return r, err
		}
	}
	r.Checkpoint = model.Checkpoint.String()
	r.Decided = place == nil || place.Decided()
	if !r.Decided {
		fmt.Fprintf(stderr, "  the placement is still choosing its checkpointing after %d warm-up steps: the timed steps include its trials (raise -warmup)\n", warmup)
	}
	if err := dev.Synchronize(); err != nil {
		return r, err
	}
	timedFrom := m.Stats().Spills
	start := time.Now()
	beside := overlap || pipeline
	timeOpt = !beside
	for range o.steps {
		if r.Loss, err = step(); err != nil {
			return r, err
		}
	}
	r.TimedSpills = m.Stats().Spills.Count - timedFrom.Count
	if err := dev.Synchronize(); err != nil {
		return r, err
	}
	el := time.Since(start).Seconds()
	r.TokS = float64(o.batch*cfg.Context*o.steps) / el
	r.StepMS = 1000 * el / float64(o.steps)
	if beside {
		// Timing the overlapped update in the timed steps would undo the
		// overlap (the step waits for it): one more step times it alone.
		timeOpt, optTime, optTimed = true, 0, 0
		if _, err := step(); err != nil {
			return r, err
		}
		timeOpt = false
	}
	if optTimed > 0 { // an average over the updates that ran, not the steps
		r.OptMS = 1000 * optTime.Seconds() / float64(optTimed)
	}
	r.Overlap, r.Pipelined = overlap, pipeline
	for _, e := range lastPlan.Entries {
		if e.Role == memory.RoleOptimizerState && e.Tier == memory.TierOffload {
			r.OffloadBytes += e.Bytes
		}
	}
	if r.OffloadBytes > 0 && r.OptMS > 0 {
		r.LinkGBs = 2 * float64(r.OffloadBytes) / (r.OptMS / 1000) / 1e9
	}

	// One more step, sampling the device's memory in use after every
	// allocation (the first allocation of an op's output follows the
	// previous op's launch).
	info := m.Pool(memory.TierDevice).Backend().Info
	if strings.HasPrefix(dev.String(), "cuda") {
		if err := dev.Synchronize(); err != nil {
			return r, err
		}
		free0, total0, ok := info()
		if ok {
			base := total0 - free0 - currentDeviceBytes(m)
			peak, n := int64(0), 0
			// cuMemGetInfo does not count managed pages resident on the
			// GPU (seen on the H200, driver 580): the managed tier, which
			// prefers the device or migrates to it on use, is counted at
			// its reserved bytes. The offload tier prefers the host and is
			// not counted.
			managed := func() int64 { return m.Stats().Tiers[memory.TierManaged].Reserved.Current }
			m.OnAlloc(func(*memory.Allocation) {
				if free, total, ok := info(); ok {
					peak = max(peak, total-free-base+managed())
					n++
				}
			})
			_, err := step()
			m.OnAlloc(nil)
			if err == nil {
				err = dev.Synchronize()
			}
			if free, total, ok := info(); ok {
				peak = max(peak, total-free-base+managed())
			}
			if err != nil {
				return r, err
			}
			r.PeakDevice, r.Sampled, r.Samples = peak, true, n
		}
	}
	st := m.Stats()
	if !r.Sampled {
		r.PeakDevice = st.Tiers[memory.TierDevice].Reserved.Peak
	}
	r.PeakMiB = float64(r.PeakDevice) / (1 << 20)
	for t := range memory.NumTiers {
		if p := st.Tiers[t].Reserved.Peak; p > 0 && st.Tiers[t].Allocs > before.Tiers[t].Allocs {
			r.TierPeaks[t.String()] = float64(p) / (1 << 20)
		}
	}
	r.Spills = st.Spills.Count - before.Spills.Count
	r.SpillBytes = st.Spills.Bytes - before.Spills.Bytes
	r.Migrated = st.Migrations.Bytes - before.Migrations.Bytes
	return r, nil
}

// currentDeviceBytes is what the manager holds in device memory now: the
// device tier's reserved bytes (managed pages may add to it; before a
// strategy starts, after EmptyCache, there are few).
func currentDeviceBytes(m *memory.Manager) int64 {
	return m.Stats().Tiers[memory.TierDevice].Reserved.Current
}

// table prints the rows as the seed's table, with ratios to the device row.
func table(rows []result) string {
	var b strings.Builder
	var ref *result
	for i := range rows {
		if rows[i].Strategy == "device" {
			ref = &rows[i]
		}
	}
	b.WriteString("| strategy | peak device MiB | vs device | tokens/s | vs device | loss | budget | checkpointing | spilled (timed) | migrated | optimizer ms | offloaded state | link GB/s | tools |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		mem, speed := "-", "-"
		if ref != nil && ref.PeakDevice > 0 && ref.TokS > 0 {
			mem = fmt.Sprintf("%.2fx", float64(r.PeakDevice)/float64(ref.PeakDevice))
			speed = fmt.Sprintf("%.2fx", r.TokS/ref.TokS)
		}
		budget := "-"
		if r.Budget > 0 {
			budget = memory.FormatBytes(r.Budget)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %s | %.4f | %s | %s | %d, %s (%d) | %s | %.1f | %s | %.1f | %s |\n", r.Strategy, r.PeakMiB, mem, r.TokS, speed, r.Loss,
			budget, r.Checkpoint, r.Spills, memory.FormatBytes(r.SpillBytes), r.TimedSpills, memory.FormatBytes(r.Migrated), r.OptMS, memory.FormatBytes(r.OffloadBytes), r.LinkGBs, r.Tools)
	}
	return b.String()
}
