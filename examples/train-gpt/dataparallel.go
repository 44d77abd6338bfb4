package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/dist"
	"github.com/strata-ml/strata/internal/cli"
	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/nccl"
	"github.com/strata-ml/strata/nn"
	"github.com/strata-ml/strata/tensor"
)

// Data-parallel training over several GPUs of this host (-gpus N): one
// process, one goroutine per GPU (locked to its OS thread), rank r on
// cuda:r with its own replica of the model, optimizer and tensor.Ctx,
// and an NCCL communicator per GPU (dist.NewNCCLGroup).
//
// The training loop of train() is unchanged and runs on the main
// goroutine with rank 0's trainer: its data loader draws the global
// batch (-batch rows), and trainer.stepOn hands each rank its own B/N
// consecutive rows and waits for all of them. Each rank runs the
// ordinary step (trainer.stepOn) on its rows with two hooks: during the
// backward pass dist.DataParallel starts each 25 MiB bucket's all-reduce
// as soon as backward has made its gradients (on a communication stream
// of the GPU; -no-overlap-reduce waits for the end of backward), and
// after it SyncGradients waits for them and makes the gradients their
// means over the GPUs (so that the gradient scaler's check, the clipping and
// the optimizer see the global batch's gradients, the same on every
// rank), and with -zero1 dist.ZeroAdamW replaces nn.AdamW. A step's loss
// is the mean of the ranks' (their rows hold the same number of trained
// tokens, so it is the global batch's). The replicas start from rank 0's
// weights (dist.DataParallel.BroadcastParameters, after -init or
// -resume), and stay identical since every rank applies the same update.
//
// Everything between steps (evaluation, logging, the progress bar,
// sampling, saving the weights and the training state) is the main
// goroutine's, on rank 0's trainer, so happens once. Rank 0's trainer in
// its goroutine is a copy of the main one sharing its model, optimizer
// and Ctx, used by one goroutine at a time. A failed step on any rank
// aborts the group (the others return at once) and ends the run with
// that rank's error.
//
// What -gpus N > 1 does not do yet (each refused with a message): -bench
// and the memory captures (their loops are bench.go's and memcapture.go's),
// -device-budget (one placement scheduler a device), -resume (the
// optimizer state would reach rank 0 only; a state saved by a data-
// parallel run resumes with -gpus 1 and the same -batch), and the
// training state with -zero1 (the moments are sharded over the GPUs).

// EnvDistNCCL, set to 1, makes -gpus 1 train through the data-parallel
// path (a one-rank NCCL communicator): for tests and the GPU script,
// which check that it gives the losses of the ordinary path.
const EnvDistNCCL = "STRATA_TRAIN_GPT_NCCL"

// distFlags registers -gpus and -zero1.
func (o *options) distFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.gpus, "gpus", 1, "train data-parallel over this many GPUs of this host (cuda:0 to cuda:N-1, one goroutine each, gradients averaged over NCCL in 25 MiB buckets); -batch is the global batch, split evenly, so it must be divisible by -gpus")
	fs.BoolVar(&o.noOverlap, "no-overlap-reduce", false, "with -gpus: all-reduce the gradient buckets after the backward pass instead of during it (by default each bucket's all-reduce starts, on a communication stream, as soon as backward has made its gradients)")
	fs.BoolVar(&o.zero1, "zero1", false, "with -gpus 2 or more: shard AdamW's moments over the GPUs (ZeRO stage 1: each keeps 1/N, updates its part, and the parameters are all-gathered)")
}

// dataParallel reports whether training takes the data-parallel path.
func (o *options) dataParallel() bool { return o.gpus > 1 || o.distNCCL }

// checkDist validates -gpus and -zero1 against the other flags (after
// the defaults are set); -batch, which may still be the config's
// default, is checked by openDevices.
func (o *options) checkDist(fs *flag.FlagSet) error {
	o.distNCCL = o.distNCCL || os.Getenv(EnvDistNCCL) == "1"
	if o.gpus < 1 {
		return fmt.Errorf("-gpus %d: want at least 1", o.gpus)
	}
	if o.zero1 && !o.dataParallel() {
		return fmt.Errorf("-zero1: needs -gpus 2 or more (ZeRO-1 shards the optimizer state over the GPUs)")
	}
	if o.noOverlap && !o.dataParallel() {
		return fmt.Errorf("-no-overlap-reduce: needs -gpus 2 or more (or %s=1): it is about the all-reduce of data-parallel training", EnvDistNCCL)
	}
	if !o.dataParallel() {
		return nil
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	what := fmt.Sprintf("-gpus %d", o.gpus)
	if o.gpus == 1 {
		what = EnvDistNCCL + "=1"
	}
	dev := strings.ToLower(strings.TrimSpace(o.device))
	if dev == "" {
		dev = strings.ToLower(strings.TrimSpace(os.Getenv("STRATA_DEVICE")))
	}
	switch {
	case dev == "cpu":
		return fmt.Errorf("%s: -device cpu (or STRATA_DEVICE=cpu): data-parallel training runs on CUDA GPUs, one a rank", what)
	case dev != "" && dev != "auto" && dev != "cuda" && dev != "gpu" && dev != "cuda:0":
		return fmt.Errorf("%s: -device %s: rank r trains on cuda:r, so leave -device out (or give cuda:0); choose the GPUs with CUDA_VISIBLE_DEVICES", what, dev)
	case o.bench || o.memTrace != "" || o.memPlot != "":
		return fmt.Errorf("%s: not with -bench, -memory-trace or -memory-plot yet (they time one GPU); time data-parallel training with -steps and the tokens/s of its log", what)
	case o.budget != "":
		return fmt.Errorf("%s: not with -device-budget yet (the placement scheduler runs on one device)", what)
	case o.resume != "" && o.gpus > 1:
		return fmt.Errorf("-resume: not with -gpus %d yet (the optimizer state would reach rank 0 only); resume with -gpus 1 and the same -batch", o.gpus)
	case o.zero1 && o.overlapOpt:
		return fmt.Errorf("-zero1: not with -overlap-optimizer (the sharded AdamW has no overlapped update)")
	case o.zero1 && (set["state"] && o.state != "" || o.saveEvery > 0):
		return fmt.Errorf("-zero1: the AdamW moments are sharded over the GPUs, which the training state file cannot hold yet: leave -state and -save-every out")
	}
	if o.zero1 {
		o.state = "" // an interrupt stops without saving (train says so)
	}
	return nil
}

// openDevices is the device of the job: -device's, or, data-parallel,
// cuda:0 after checking that -batch divides over -gpus, that the driver
// sees -gpus GPUs and that NCCL loads, and opening cuda:0 to cuda:N-1
// (o.gpuDevs).
func openDevices(o *options) (tensor.Device, error) {
	if !o.dataParallel() {
		dev, err := cli.OpenDevice(o.device)
		if err != nil { // no such device here (no GPU, no driver): a bad flag, worded as in generate
			return nil, &cli.ExitError{Code: 2, Msg: err.Error()}
		}
		return dev, nil
	}
	if o.batch%o.gpus != 0 {
		return nil, &cli.ExitError{Code: 2, Msg: fmt.Sprintf("-batch %d: not divisible by -gpus %d: each GPU trains an equal share of the global batch (-batch)", o.batch, o.gpus)}
	}
	if o.localRanks { // tests: the ranks on the CPU, through dist.NewLocalGroup
		o.gpuDevs = make([]tensor.Device, o.gpus)
		for i := range o.gpuDevs {
			o.gpuDevs[i] = tensor.CPU()
		}
		return o.gpuDevs[0], nil
	}
	// The GPUs or NCCL not there: a bad flag (status 2), before any work.
	if err := cuda.Init(); err != nil {
		return nil, &cli.ExitError{Code: 2, Msg: fmt.Sprintf("-gpus %d: data-parallel training needs CUDA GPUs, and the CUDA driver does not load: %v", o.gpus, err)}
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("-gpus %d: counting the GPUs: %w", o.gpus, err)
	}
	if n < o.gpus {
		vis := ""
		if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); ok {
			vis = fmt.Sprintf(" (CUDA_VISIBLE_DEVICES=%q)", v)
		}
		return nil, &cli.ExitError{Code: 2, Msg: fmt.Sprintf("-gpus %d: the CUDA driver sees %d GPUs%s", o.gpus, n, vis)}
	}
	if err := nccl.Init(); err != nil {
		return nil, &cli.ExitError{Code: 2, Msg: fmt.Sprintf("-gpus %d: data-parallel training averages the gradients with NCCL: %v", o.gpus, err)}
	}
	if _, set := os.LookupEnv(memory.EnvExpandableSegments); !set && o.gpus > 1 {
		// Expandable segments map pages readable by their own GPU only
		// (cuMemSetAccess), where NCCL's peer-to-peer transfers between
		// the ranks' buffers want them readable by the peers: until that
		// runs on a machine with several GPUs, the ranks take classic
		// segments unless the variable asks otherwise. The variable stays
		// set for the rest of the process, and a device opened before
		// (tensor.CUDA caches them) keeps the memory it was opened with.
		if err := os.Setenv(memory.EnvExpandableSegments, "0"); err != nil {
			return nil, fmt.Errorf("-gpus %d: %w", o.gpus, err)
		}
	}
	o.gpuDevs = make([]tensor.Device, o.gpus)
	for i := range o.gpuDevs {
		if o.gpuDevs[i], err = tensor.CUDA(i); err != nil {
			return nil, fmt.Errorf("-gpus %d: %w", o.gpus, err)
		}
	}
	return o.gpuDevs[0], nil
}

// dataParallel is the main goroutine's handle on the ranks.
type dataParallel struct {
	main    *trainer // rank 0's trainer, as the training loop sees it
	ranks   []*dpRank
	group   *dist.NCCLGroup // nil for a local group (tests)
	b       int             // rows a rank
	results chan dpResult
	started bool // the ranks' goroutines run
}

// dpRank is one rank: its trainer (rank 0's a copy of the main one,
// sharing model, optimizer and Ctx), its DataParallel and, with -zero1,
// its sharded AdamW. Its goroutine runs the steps sent on jobs.
type dpRank struct {
	rank  int
	tr    *trainer
	own   bool // tr's model and optimizer are the rank's own (rank > 0), released with it
	coll  dist.Collective
	d     *dist.DataParallel
	zero  *dist.ZeroAdamW
	jobs  chan dpJob
	ended chan struct{}
}

type dpJob struct {
	it int
	s  *slot
}

type dpResult struct {
	rank int
	loss float64
	err  error
}

// startDataParallel starts the ranks of -gpus (or of EnvDistNCCL's one
// rank) for t, rank 0's trainer, whose weights (-init, -resume) the
// others receive; t.stepOn then trains them all. It does nothing for the
// ordinary path.
func (t *trainer) startDataParallel(o *options, cfg nn.GPTConfig) (err error) {
	if !o.dataParallel() {
		return nil
	}
	n := len(o.gpuDevs)
	if n == 0 || o.gpuDevs[0] != t.dev {
		return fmt.Errorf("train-gpt: data-parallel training started without its devices (openDevices)")
	}
	dp := &dataParallel{main: t, b: t.B / n, results: make(chan dpResult, n)}
	var colls []dist.Collective
	if o.localRanks {
		colls = dist.NewLocalGroup(n)
	} else {
		if dp.group, err = dist.NewNCCLGroup(o.gpuDevs); err != nil {
			return fmt.Errorf("-gpus %d: %w", o.gpus, err)
		}
		for r := range n {
			colls = append(colls, dp.group.Rank(r))
		}
	}
	defer func() {
		if err != nil {
			dp.stop()
		}
	}()
	for r, dev := range o.gpuDevs {
		rk := &dpRank{rank: r, coll: colls[r], jobs: make(chan dpJob), ended: make(chan struct{})}
		if r == 0 {
			c := *t
			rk.tr = &c
		} else {
			if err := setPolicy(dev, o.policy); err != nil {
				return err
			}
			ro := *o
			ro.batch = dp.b
			// Another seed for the model each rank > 0 builds: its weights
			// are rank 0's after BroadcastParameters, but its dropout seeds
			// come from it, and with rank 0's seed every rank would drop the
			// same positions of its rows (its Ctx's random offsets advance
			// as rank 0's do).
			ro.seed = o.seed + uint64(r)*0x9E3779B97F4A7C15
			if rk.tr, err = newTrainer(&ro, cfg, dev, t.T); err != nil {
				return fmt.Errorf("rank %d on %v: %w", r, dev, err)
			}
			rk.own = true
		}
		rk.tr.dp = nil
		rk.tr.B = dp.b
		rk.tr.xs, rk.tr.ys = make([]int32, dp.b*t.T), make([]int32, dp.b*t.T)
		dp.ranks = append(dp.ranks, rk)
	}
	// Each rank sets up on its goroutine: the broadcast and ZeroAdamW's
	// construction are collective calls.
	for _, rk := range dp.ranks {
		go rk.run(o, dp.results)
	}
	dp.started = true
	if err := dp.wait(); err != nil {
		return fmt.Errorf("starting data-parallel training: %w", err)
	}
	t.dp = dp
	comm := "dist.NewLocalGroup (tests)"
	if dp.group != nil {
		v, _ := nccl.Version()
		p, _ := nccl.LibraryPath()
		comm = fmt.Sprintf("NCCL %s (%s)", nccl.VersionString(v), p)
	}
	d := dp.ranks[0].d
	var bytes int64
	for _, b := range d.Buckets() {
		bytes += b.Bytes()
	}
	opt := "AdamW on every rank"
	if o.zero1 {
		opt = fmt.Sprintf("ZeRO-1 AdamW (each rank keeps the moments of %d elements)", dp.ranks[0].zero.ShardElements())
	}
	when := "each started during backward once its gradients are made"
	if o.noOverlap {
		when = "after backward: -no-overlap-reduce"
	}
	fmt.Fprintf(os.Stderr, "data-parallel: %d ranks on %v, %d of the %d rows of a batch each; gradients (%.1f MiB) averaged in %d buckets (%s) over %s; %s\n",
		n, o.gpuDevs, dp.b, t.B, float64(bytes)/(1<<20), len(d.Buckets()), when, comm, opt)
	return nil
}

// run is rank rk's goroutine: set-up, then one step a job until jobs is
// closed, then its own resources released.
func (rk *dpRank) run(o *options, results chan<- dpResult) {
	runtime.LockOSThread() // CUDA's current context and NCCL's state are per thread
	defer runtime.UnlockOSThread()
	defer close(rk.ended)
	defer rk.release()
	results <- dpResult{rank: rk.rank, err: rk.setup(o)}
	for job := range rk.jobs {
		loss, err := rk.tr.stepOn(job.it, job.s)
		if err != nil {
			rk.coll.Abort(err) // the others return instead of waiting for this rank
		} else {
			loss, err = rk.d.AllReduceMean(loss)
		}
		results <- dpResult{rank: rk.rank, loss: loss, err: err}
	}
}

// setup makes the rank's DataParallel, gives it rank 0's weights and,
// with -zero1, makes its sharded AdamW; then hooks both into its trainer.
func (rk *dpRank) setup(o *options) error {
	d, err := dist.New(rk.coll, rk.tr.params, dist.Options{NoOverlap: o.noOverlap})
	if err != nil {
		rk.coll.Abort(err)
		return err
	}
	rk.d = d
	if err := d.BroadcastParameters(); err != nil {
		return err
	}
	rk.tr.sync = d.SyncGradients
	if o.zero1 {
		z, err := dist.NewZeroAdamW(rk.coll, rk.tr.params, o.lr, o.wd)
		if err != nil {
			rk.coll.Abort(err)
			return err
		}
		z.Beta1, z.Beta2, z.Eps = rk.tr.opt.Beta1, rk.tr.opt.Beta2, rk.tr.opt.Eps // newTrainer's AdamW settings
		rk.zero = z
		rk.tr.altOpt = z
	}
	return nil
}

// release frees what the rank made: its DataParallel and sharded AdamW,
// and, for ranks > 0, its model and optimizer.
func (rk *dpRank) release() {
	if rk.zero != nil {
		rk.zero.Release()
	}
	if rk.d != nil {
		rk.d.Release()
	}
	if rk.own && rk.tr != nil {
		rk.tr.release()
	}
}

// wait is collect without the loss (the set-up's results).
func (dp *dataParallel) wait() error {
	_, err := dp.collect()
	return err
}

// collect takes one result from every rank and returns rank 0's loss and
// the error that ended the step: a rank's own (not an abort it caused
// elsewhere) first.
func (dp *dataParallel) collect() (float64, error) {
	var loss float64
	var first, aborted error
	for range dp.ranks {
		r := <-dp.results
		if r.rank == 0 {
			loss = r.loss
		}
		switch {
		case r.err == nil:
		case errors.Is(r.err, dist.ErrAborted):
			if aborted == nil {
				aborted = fmt.Errorf("rank %d: %w", r.rank, r.err)
			}
		case first == nil:
			first = r.err
			if len(dp.ranks) > 1 {
				first = fmt.Errorf("rank %d (%v): %w", r.rank, dp.ranks[r.rank].tr.dev, r.err)
			}
		}
	}
	if first == nil {
		first = aborted
	}
	return loss, first
}

// step trains every rank on its rows of the batch in s (nil: the main
// trainer's xs, ys) and returns the mean of their losses.
func (dp *dataParallel) step(it int, s *slot) (float64, error) {
	xs, ys := dp.main.xs, dp.main.ys
	if s != nil {
		xs, ys = s.xs, s.ys
	}
	rows := dp.b * dp.main.T
	for r, rk := range dp.ranks {
		rk.jobs <- dpJob{it: it, s: &slot{xs: xs[r*rows : (r+1)*rows], ys: ys[r*rows : (r+1)*rows]}}
	}
	loss, err := dp.collect()
	dp.main.skips = dp.ranks[0].tr.skips // what the training state saves
	return loss, err
}

// stop ends the ranks' goroutines (each releases its own rank) or, for
// a start that failed before they ran, releases the ranks here; then it
// destroys the communicators.
func (dp *dataParallel) stop() {
	for _, rk := range dp.ranks {
		if !dp.started {
			rk.release()
			continue
		}
		close(rk.jobs)
		<-rk.ended
	}
	dp.ranks = nil
	if dp.group != nil {
		if err := dp.group.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "train-gpt:", err)
		}
		dp.group = nil
	}
}

// stopDataParallel stops the ranks, if t has any.
func (t *trainer) stopDataParallel() {
	if t.dp != nil {
		t.dp.stop()
		t.dp = nil
	}
}
