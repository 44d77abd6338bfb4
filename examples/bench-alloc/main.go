package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
)

// Goals of issue 12 for the pool's pair: the mixed workload under
// goalMixedNs, every fixed size under goalFixedNs, each at least
// goalSpeedup times faster than cuMemAllocAsync.
const (
	goalMixedNs = 100
	goalFixedNs = 80
	goalSpeedup = 20
)

// goalNs is the goal's bound for workload w.
func goalNs(w workload) float64 {
	if w.size == 0 {
		return goalMixedNs
	}
	return goalFixedNs
}

type traceFlags []string

func (t *traceFlags) String() string     { return strings.Join(*t, ",") }
func (t *traceFlags) Set(s string) error { *t = append(*t, s); return nil }

type options struct {
	device   string
	minTime  time.Duration
	reps     int
	seed     uint64
	traces   traceFlags
	noBench  bool
	segments string
	plots    string
	scale    float64
	plan     bool
	// loaded is each -trace, read and scanned once by parseOptions when it
	// checks them (a path named twice too), for every replay of it;
	// replayTrace loads a trace that is not here.
	loaded map[string]*loadedTrace
}

// report is the JSON line.
type report struct {
	Bench       string             `json:"bench"`
	Date        string             `json:"date"`
	Device      string             `json:"device"`
	Backend     string             `json:"backend"`
	Go          string             `json:"go"`
	CPUs        int                `json:"cpus"`
	Seed        uint64             `json:"seed"`
	MinTimeMs   float64            `json:"min_time_ms"`
	Reps        int                `json:"reps"`
	Rows        []result           `json:"rows"`
	SpeedupPool map[string]float64 `json:"speedup_pool_vs_async,omitempty"`
	SpeedupExp  map[string]float64 `json:"speedup_pool_expandable_vs_async,omitempty"`
	SpeedupMgr  map[string]float64 `json:"speedup_manager_vs_async,omitempty"`
	Goal        *goal              `json:"goal,omitempty"`
	Traces      []traceResult      `json:"traces,omitempty"`
}

// goal is the bound on the pool's pair, and whether each
// workload meets it with classic segments (Met) and expandable ones
// (MetExpandable).
type goal struct {
	MixedNs       float64         `json:"mixed_pair_ns_below"`
	FixedNs       float64         `json:"fixed_pair_ns_below"`
	Speedup       float64         `json:"speedup_at_least"`
	Met           map[string]bool `json:"met"`
	MetExpandable map[string]bool `json:"met_expandable"`
}

// main exits with 0 on success and for -h, 2 for a bad flag (or a -trace
// or -plots that cannot be used, or -device cuda without a usable GPU), 1
// for a failure of the run, writing its results included.
func main() {
	err := mainErr(os.Args[1:])
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "bench-alloc:", err)
	}
	os.Exit(cli.ExitCode(err))
}

func mainErr(args []string) error { return mainTo(args, os.Stdout, os.Stderr) }

// mainTo runs with the JSON lines written to stdout and the tables, and
// the pairs' rows as they are timed, to stderr; a write of either that
// fails is a failure of the run.
func mainTo(args []string, stdout, stderr io.Writer) error {
	out, errOut := &cli.StickyWriter{W: stdout}, &cli.StickyWriter{W: stderr}
	if err := run(args, out, errOut); err != nil {
		return err
	}
	if out.Err != nil {
		return fmt.Errorf("writing the results to stdout: %w", out.Err)
	}
	if errOut.Err != nil {
		return fmt.Errorf("writing the tables to stderr: %w", errOut.Err)
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	rep := report{Rows: []result{}, Bench: "bench-alloc", Date: time.Now().UTC().Format(time.RFC3339), Go: runtime.Version(),
		CPUs: runtime.NumCPU(), Seed: o.seed, Reps: o.reps, MinTimeMs: float64(o.minTime) / float64(time.Millisecond)}

	var ctx *cuda.Context
	switch o.device {
	case "cuda":
		var err error
		if ctx, err = gpu(); err != nil { // a bad flag, before any work
			return cli.Usagef("-device cuda: no usable GPU: %s (-device cpu runs the host rows)", strings.TrimPrefix(err.Error(), "cuda: "))
		}
		rep.Backend, rep.Device = "cuda", ctx.Properties().Name
	case "cpu":
		rep.Backend, rep.Device = "cpu", cpuName()
	default:
		return fmt.Errorf("-device %q: want cuda or cpu", o.device)
	}

	newBackend := func() memory.Backend { return memory.NewHostBackend(memory.TierDevice) }
	if ctx != nil {
		newBackend = func() memory.Backend { return memory.NewDeviceBackend(ctx) }
	}
	if len(o.traces) > 0 {
		if err := checkSegments(o, newBackend); err != nil { // before any work
			return err
		}
	}
	if !o.noBench {
		if err := benchPairs(ctx, o, &rep, stderr); err != nil {
			return err
		}
	}
	for _, path := range o.traces {
		tr, err := replayTrace(path, newBackend, o)
		if err != nil {
			return err
		}
		rep.Traces = append(rep.Traces, tr)
	}
	printTables(stderr, &rep)
	// One JSON line per trace, then one for the pairs.
	for _, tr := range rep.Traces {
		line, err := json.Marshal(traceLine{Bench: "bench-alloc-trace", Date: rep.Date, Device: rep.Device, Backend: rep.Backend,
			Go: rep.Go, CPUs: rep.CPUs, traceResult: tr})
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(line))
	}
	if len(rep.Rows) == 0 {
		return nil
	}
	rep.Traces = nil
	line, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(line))
	return nil
}

// parseOptions reads the flags and checks them, and the inputs and
// outputs they name, before any work; its errors are usageErrors.
func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench-alloc", flag.ContinueOnError)
	fs.StringVar(&o.device, "device", "cuda", "cuda (device 0) or cpu (the pool over host memory only)")
	fs.DurationVar(&o.minTime, "mintime", 200*time.Millisecond, "shortest timed run")
	fs.IntVar(&o.reps, "reps", 5, "timed runs per row, and replays per trace and mode; the median is reported")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the mixed workload")
	fs.Var(&o.traces, "trace", "a PyTorch allocation trace (CSV: action,addr,size,stream) to replay; repeatable")
	fs.BoolVar(&o.noBench, "no-bench", false, "skip the allocation pairs (replay traces only)")
	fs.StringVar(&o.segments, "segments", "both", "trace replays with classic segments, expandable ones, or both")
	fs.StringVar(&o.plots, "plots", "", "write each trace replay's Chrome trace, timeline and peak segment map into this folder")
	fs.BoolVar(&o.plan, "plan-steps", true, "expandable replays plan the steps of the trace (memory.PoolConfig.PlanSteps), as a CUDA manager's device tier does by default; =false: the usual placement only")
	fs.Float64Var(&o.scale, "scale", 1, "multiply every allocation size of the traces by this: a model of another size with the same pattern (PyTorch's figures stay those of the trace as recorded)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, cli.UsageHint(fs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if o.minTime <= 0 {
		return o, cli.Usagef("-mintime %v must be positive", o.minTime)
	}
	if !(o.scale > 0 && o.scale <= 64) {
		return o, cli.Usagef("-scale %v: want more than 0 and at most 64", o.scale)
	}
	if o.segments != "both" && o.segments != "classic" && o.segments != "expandable" {
		return o, cli.Usagef("-segments %q: want both, classic or expandable", o.segments)
	}
	if o.reps < 1 || o.reps > 1000 {
		return o, cli.Usagef("-reps %d: want 1 to 1000", o.reps)
	}
	if o.device != "cuda" && o.device != "cpu" {
		return o, cli.Usagef("-device %q: want cuda or cpu", o.device)
	}
	// The flags only a trace replay uses, without a trace, would be ignored.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if len(o.traces) == 0 {
		if o.noBench {
			return o, cli.Usagef("-no-bench without -trace: nothing to run")
		}
		for _, name := range []string{"plots", "scale", "segments", "plan-steps"} {
			if set[name] {
				return o, cli.Usagef("-%s: only with -trace", name)
			}
		}
	}
	if o.noBench {
		for _, name := range []string{"seed", "mintime"} {
			if set[name] {
				return o, cli.Usagef("-%s: only for the allocation pairs, which -no-bench skips", name)
			}
		}
	}
	if set["plots"] && o.plots == "" { // -plots "$DIR" with DIR unset: no pictures, said nowhere
		return o, cli.Usagef("-plots: empty folder name")
	}
	if set["plan-steps"] && o.segments == "classic" { // either way: classic replays have no plans
		return o, cli.Usagef("-plan-steps plans expandable replays: not with -segments classic")
	}
	// Every trace is read and checked, and -plots made writable, before
	// the benchmark: a bad one fails in a second, not after the pairs.
	// Each is read once, and what the check computes is what the replays
	// use: a trace on a pipe (-trace /dev/stdin) can be read only once.
	o.loaded = map[string]*loadedTrace{}
	for _, path := range o.traces {
		if path == "" { // os.Stat's error names no file: "stat : no such file or directory"
			return o, cli.Usagef("-trace: empty file name")
		}
		if o.loaded[path] != nil {
			continue
		}
		lt, err := loadTrace(path, o.scale)
		if err != nil {
			return o, cli.Usagef("-trace: %w", err)
		}
		o.loaded[path] = lt
	}
	if o.plots != "" {
		// plotReplay names the files after the trace's base name.
		names := map[string]string{}
		for _, path := range o.traces {
			name := strings.TrimSuffix(filepath.Base(path), ".csv")
			if prev, ok := names[name]; ok && filepath.Clean(prev) != filepath.Clean(path) {
				return o, cli.Usagef("-plots: -trace %s and -trace %s would both write %s-* there", prev, path, name)
			}
			names[name] = path
		}
		if err := checkDir(o.plots); err != nil {
			return o, cli.Usagef("-plots: %w", err)
		}
	}
	return o, nil
}

// checkDir makes dir if need be and checks that files can be made in it.
func checkDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".bench-alloc-check-*")
	if err != nil {
		return err
	}
	return errors.Join(f.Close(), os.Remove(f.Name()))
}

// traceLine is the JSON line of one trace.
type traceLine struct {
	Bench   string `json:"bench"`
	Date    string `json:"date"`
	Device  string `json:"device"`
	Backend string `json:"backend"`
	Go      string `json:"go"`
	CPUs    int    `json:"cpus"`
	traceResult
}

// replayTrace replays a trace (loaded by parseOptions, else read here)
// with classic segments and, when the backend has the virtual memory API,
// with expandable ones, each over a fresh backend; with -plots it also
// writes the pictures of each.
func replayTrace(path string, newBackend func() memory.Backend, o options) (traceResult, error) {
	lt := o.loaded[path]
	if lt == nil {
		var err error
		if lt, err = loadTrace(path, o.scale); err != nil {
			return traceResult{}, err
		}
	}
	if err := checkSegments(o, newBackend); err != nil {
		return traceResult{}, err
	}
	res, ops, slots := lt.res, lt.ops, lt.slots
	modes := []bool{false, true}
	switch o.segments {
	case "classic":
		modes = modes[:1]
	case "expandable":
		modes = modes[1:]
	}
	for _, exp := range modes {
		b := newBackend()
		if _, ok := b.(memory.VirtualMemory); exp && !ok {
			continue
		}
		// The replay is deterministic but its time is not: each mode
		// runs o.reps times over fresh backends, and the median counts.
		var pr poolResult
		var ns []float64
		for r := range o.reps {
			if r > 0 {
				b = newBackend()
			}
			var err error
			if pr, err = replay(path, &res, ops, slots, b, exp, o.plan); err != nil {
				return res, err
			}
			ns = append(ns, pr.NsPerCall)
		}
		pr.NsPerCall, pr.Reps = median(ns), o.reps
		if exp {
			res.Expandable = &pr
		} else {
			res.Classic = &pr
		}
		if o.plots != "" {
			if err := plotReplay(path, ops, slots, newBackend(), exp, o.plan, o.plots); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// checkSegments refuses -segments expandable over the backends newBackend
// makes when they have no virtual memory API (STRATA_EXPANDABLE_SEGMENTS=0,
// a GPU without it): the trace replays would run no mode at all. With
// -segments both the classic replays run alone.
func checkSegments(o options, newBackend func() memory.Backend) error {
	if o.segments != "expandable" {
		return nil
	}
	b := newBackend()
	if _, ok := b.(memory.VirtualMemory); !ok {
		return cli.Usagef("-segments expandable: %s has no virtual memory for expandable segments (%s=0, or a GPU without the virtual memory API): want classic or both", b.Name(), memory.EnvExpandableSegments)
	}
	return nil
}

// gpu returns device 0's primary context.
func gpu() (*cuda.Context, error) {
	if err := cuda.Init(); err != nil {
		return nil, err
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("the CUDA driver sees no device")
	}
	return cuda.Device(0).PrimaryContext()
}

// cpuName is the processor's model from /proc/cpuinfo, or the
// architecture.
func cpuName() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// expandablePool returns the maker of the pool with expandable segments
// over the backends newBackend makes (the GPU's default device memory):
// the same pair, plus the page mappings its growth makes when no free
// block fits; nil when the backend has no virtual memory
// (STRATA_EXPANDABLE_SEGMENTS=0, a GPU without the virtual memory API,
// host memory off Unix), and the row is left out, saying so on log.
func expandablePool(newBackend func() memory.Backend, log io.Writer) func() (allocator, error) {
	if _, ok := newBackend().(memory.VirtualMemory); !ok {
		fmt.Fprintln(log, "bench-alloc: no virtual memory for expandable segments: no 'pool expandable' row")
		return nil
	}
	return func() (allocator, error) {
		return newPoolAlloc("pool expandable", newBackend(), memory.PoolConfig{Expandable: true}, liveSlots), nil
	}
}

// benchPairs runs every allocator on every workload, writing each row to
// log (run's stderr, where the tables go) as it is timed.
func benchPairs(ctx *cuda.Context, o options, rep *report, log io.Writer) error {
	seq := newMixedSeq(o.seed)
	var makers []func() (allocator, error)
	if ctx == nil {
		makers = []func() (allocator, error){
			func() (allocator, error) {
				return newPoolAlloc("pool", memory.NewHostBackend(memory.TierHost), memory.PoolConfig{}, liveSlots), nil
			},
			expandablePool(func() memory.Backend { return memory.NewHostBackend(memory.TierHost) }, log),
			func() (allocator, error) {
				return newManagerAlloc("manager", memory.NewHostManager(memory.Config{}), liveSlots), nil
			},
		}
	} else {
		makers = []func() (allocator, error){
			func() (allocator, error) {
				return newPoolAlloc("pool", memory.NewDeviceBackend(ctx), memory.PoolConfig{}, liveSlots), nil
			},
			expandablePool(func() memory.Backend { return memory.NewDeviceBackend(ctx) }, log),
			func() (allocator, error) {
				m, err := memory.NewCUDAManager(ctx, memory.Config{})
				if err != nil {
					return nil, err
				}
				return newManagerAlloc("manager", m, liveSlots), nil
			},
			func() (allocator, error) { return &rawAlloc{c: ctx, ptrs: make([]cuda.DevicePtr, liveSlots)}, nil },
			func() (allocator, error) { return newAsyncAlloc(ctx, liveSlots) },
		}
	}
	makers = slices.DeleteFunc(makers, func(f func() (allocator, error)) bool { return f == nil })
	for _, w := range workloads {
		rows, err := timeWorkload(makers, w, seq, o)
		if err != nil {
			return err
		}
		for _, r := range rows {
			fmt.Fprintf(log, "%-16s %-6s %12.1f ns/pair (median of %d runs of %d pairs; %.1f to %.1f)\n",
				r.Allocator, r.Workload, r.NsPerPair, r.Reps, r.Pairs, r.NsMin, r.NsMax)
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	if ctx == nil {
		return nil
	}
	rep.SpeedupPool, rep.SpeedupExp, rep.SpeedupMgr = map[string]float64{}, map[string]float64{}, map[string]float64{}
	rep.Goal = &goal{MixedNs: goalMixedNs, FixedNs: goalFixedNs, Speedup: goalSpeedup, Met: map[string]bool{}, MetExpandable: map[string]bool{}}
	for _, w := range workloads {
		pool, okPool := row(rep, "pool", w.name)
		mgr, okMgr := row(rep, "manager", w.name)
		async, okAsync := row(rep, "cuMemAllocAsync", w.name)
		if !okPool || !okMgr || !okAsync {
			return fmt.Errorf("no pool, manager or cuMemAllocAsync row for the %s workload", w.name)
		}
		rep.SpeedupPool[w.name] = async.NsPerPair / pool.NsPerPair
		rep.SpeedupMgr[w.name] = async.NsPerPair / mgr.NsPerPair
		rep.Goal.Met[w.name] = pool.NsPerPair < goalNs(w) && rep.SpeedupPool[w.name] >= goalSpeedup
		if exp, ok := row(rep, "pool expandable", w.name); ok {
			rep.SpeedupExp[w.name] = async.NsPerPair / exp.NsPerPair
			rep.Goal.MetExpandable[w.name] = exp.NsPerPair < goalNs(w) && rep.SpeedupExp[w.name] >= goalSpeedup
		}
	}
	return nil
}

// timeWorkload sets every allocator up on w, then times -reps rounds in
// which each allocator makes one run, the first one rotating: a stall of
// the machine hits the allocators alike, not the one that happened to run
// at the time, and the speedups compare like with like.
func timeWorkload(makers []func() (allocator, error), w workload, seq mixedSeq, o options) (rows []result, err error) {
	var timers []*timer
	defer func() {
		for _, t := range timers {
			if cerr := t.a.close(); err == nil && cerr != nil {
				err = fmt.Errorf("%s, %s workload: %w", t.a.name(), w.name, cerr)
			}
		}
	}()
	for _, mk := range makers {
		a, err := mk()
		if err != nil {
			return nil, err
		}
		t, err := newTimer(a, w, seq, o.minTime)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s, %s workload: %w", a.name(), w.name, err), a.close())
		}
		timers = append(timers, t)
	}
	for r := range o.reps {
		for i := range timers {
			t := timers[(i+r)%len(timers)]
			if err := t.timeRun(); err != nil {
				return nil, fmt.Errorf("%s, %s workload: %w", t.a.name(), w.name, err)
			}
		}
	}
	for _, t := range timers {
		res, err := t.finish()
		if err != nil {
			return nil, fmt.Errorf("%s, %s workload: %w", t.a.name(), w.name, err)
		}
		rows = append(rows, res)
	}
	return rows, nil
}

// row finds the result of an allocator on a workload, and reports
// whether there is one.
func row(rep *report, alloc, work string) (result, bool) {
	for _, r := range rep.Rows {
		if r.Allocator == alloc && r.Workload == work {
			return r, true
		}
	}
	return result{}, false
}
