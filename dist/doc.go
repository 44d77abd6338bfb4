// Package dist is data-parallel training for strata, independent of the
// device: a Collective interface (all-reduce, reduce-scatter and
// all-gather over a group of ranks), an in-process group of goroutines
// that implements it on any device (NewLocalGroup), one over NCCL, a GPU
// a rank (NewNCCLGroup), and DataParallel, which averages
// gradients over the ranks in buckets as PyTorch's
// DistributedDataParallel (DDP) does, each bucket's all-reduce started
// while backward still runs; and ZeroAdamW, AdamW with its state
// sharded over the ranks (ZeRO stage 1).
//
// # Design
//
// Every rank holds a replica of the model and its optimizer, and runs the
// same program on its own goroutine (NewLocalGroup) or, with an NCCL
// Collective, its own GPU, each with its own tensor.Ctx. A step is:
// forward and backward on the rank's slice of the global batch (during
// which the buckets' all-reduces start, see "Overlap"), then
// DataParallel.SyncGradients, which replaces every gradient by its mean
// over the ranks, then clipping and the optimizer exactly as in a
// single-process run. Since the replicas start identical
// (BroadcastParameters makes them so) and every rank applies the same
// averaged gradients, they stay identical, bit for bit, without ever
// exchanging parameters; with equal slices of the batch (the same number
// of tokens per rank) the mean gradient is the whole batch's, so N ranks
// train as one rank on the global batch, up to float32 rounding.
//
//	colls := dist.NewLocalGroup(n) // once, before the ranks start
//	coll := colls[rank]            // on rank's goroutine
//	d, err := dist.New(coll, model.Parameters(), dist.Options{})
//	err = d.BroadcastParameters()
//	for step := range steps {
//		err := nn.Step(c, func() error {
//			nn.ZeroGrad(ps)
//			loss := model.Loss(x, y) // this rank's rows
//			if err := loss.Backward(); err != nil {
//				return err
//			}
//			if err := d.SyncGradients(); err != nil {
//				return err
//			}
//			nn.ClipGradNorm(ps, 1)
//			return opt.Step()
//		})
//		if err != nil {
//			d.Abort(err) // the other ranks get an error instead of waiting
//			return err
//		}
//	}
//
// # Why buckets
//
// One collective call per parameter pays the call's fixed latency (NCCL:
// kernel launch and the ring's handshake, some microseconds) once per
// tensor, hundreds of times a step for GPT-2; one call for the whole
// model cannot start before the last gradient exists. Buckets of about
// 25 MiB (Options.BucketBytes, DDP's bucket_cap_mb) amortise the latency
// and still allow overlap: AssignBuckets takes the parameters in reverse
// order of registration, roughly the order backward produces their
// gradients (the head and last block first), so the first bucket is
// complete, and can be reduced, while backward still computes the
// others. Each bucket is one flat buffer (allocated once, role gradient)
// into which its gradients are copied, reduced in one AllReduceSum,
// divided by the number of ranks and copied back, as DDP's buckets are.
// A parameter larger than a bucket gets its own; a bucket holds one
// dtype; frozen parameters are not reduced (those frozen when New runs:
// one unfrozen later is refused by SyncGradients and ZeroAdamW's Step,
// which aborts the group: unfreeze before New).
//
// A parameter that has no gradient on some rank (a branch that rank's
// batch did not take) contributes zeros, so every rank makes the same
// calls; a presence count, all-reduced once per step in one more small
// call, tells afterwards which parameters some rank gave a gradient:
// those get the mean everywhere, the others keep none, as in a
// single-process run.
//
// The same small call carries every rank's signature of its parameters
// (their number, and a hash of their names, dtypes, shapes, order, which
// are trainable, their gradient dtypes, and the bucket size), which
// every rank compares before copying anything back: ranks built with
// different parameter lists whose buckets happen to hold as many
// elements (a transposed shape, two parameters swapped, another one
// frozen) would otherwise make calls that match and average unrelated
// gradients, silently; ranks whose gradient dtypes differ would round
// the same mean differently, and drift apart. A mismatch is an
// error wrapping ErrMismatch on every rank, the gradients as they were
// before the call; a rank with no trainable parameter makes the call
// too, so that a rank that has some does not wait for it forever.
// BroadcastParameters compares the signatures first, in a call of its
// own, and ZeroAdamW its trainable parameters' (with their Decay flags)
// and its settings at its first Step.
//
// # NCCL
//
// NewNCCLGroup(devs) is the Collective of real multi-GPU training: one
// NCCL communicator per GPU, made by nccl.CommInitAll in one call, and
// Rank(i) is the Collective of the goroutine that drives devs[i]. Its
// calls are NCCL's in-place collectives on one contiguous tensor
// (ncclAllReduce with sendbuff == recvbuff; ncclReduceScatter with
// recvbuff = sendbuff + Rank·n/Size elements; ncclAllGather with
// sendbuff = recvbuff + Rank·n/Size), on the tensor's device address
// (tensor.CUDAPointer), summing, in float32, float64, float16, bfloat16
// or int32 (NCCL's types; a dtype without one is an error wrapping
// tensor.ErrDType). A call returns once NCCL has queued it: the result
// is read, as any op's, by the ops queued after it.
//
// Which stream: the plain calls (AllReduceSum, ReduceScatterSum,
// AllGather) go on the compute stream, the device's own
// (tensor.CUDAStream), on which every op of the device is queued, where
// stream order alone makes them see the data written before and makes
// every later op see their result, with no event and no host wait. The
// ranks' StartAllReduceSum (AsyncCollective), through which DataParallel
// overlaps the buckets with backward, uses a second stream (see
// "Overlap").
//
// Layout: one process drives every GPU, one goroutine per rank, each
// locked to its OS thread (CUDA's current context and NCCL's group state
// are per thread) and with its own tensor.Ctx on its GPU; the
// communicators come from one nccl.CommInitAll. Why, rather than one
// process per GPU (nccl's doc recommends that for a launcher): the ranks
// share the data loader and the address space, a group's failure is seen
// by every rank at once (Abort aborts every communicator, and the ranks'
// calls are checked against each other), the CPU build and its tests
// need no launcher, and train-gpt -gpus N is one command. The cost: the
// ranks share one Go runtime and garbage collector, and, with several
// contexts live, every CUDA call sets its context (package cuda). The
// nccl package supports the other layout (GetUniqueID, CommInitRank);
// a Collective over a communicator of another process is not built.
//
// Errors and abort: before queuing anything, a rank checks its call (a
// nil or released tensor, one on another device, not contiguous, not
// divisible into Size chunks) and compares it with the other ranks' same
// call (operation, dtype, size; a rank may run ahead, and the first
// rank's record is the reference): NCCL itself would hang or read out of
// bounds on a mismatch. A failed check, NCCL's error, an asynchronous
// error the communicator reports, or Abort fails the group: every rank's
// communicator is aborted (ncclCommAbort, which stops the collectives
// they have queued, so a rank waiting on its stream returns), and every
// later call returns an error wrapping ErrAborted and the cause. A rank
// that had queued a collective before the abort may find its result
// unspecified or its next wait failing; its next call returns the
// group's error.
//
// # Overlap
//
// As DDP does, DataParallel starts each bucket's all-reduce while
// backward still computes the gradients of the buckets after it
// (Options.NoOverlap turns this off; the results are the same bits).
// New sets a gradient hook on every bucketed parameter
// (autograd.Var.SetGradHook): autograd counts, at the start of each
// backward pass, the uses of every hooked leaf in the graph, and calls
// its hook once the last node using it has run, so the hook sees the
// gradient final. When every parameter of a bucket is final, and every
// bucket before it has been started, the bucket's gradients are copied
// into its flat buffer and its all-reduce is started; then the next
// complete buckets, in order. Buckets therefore start in index order on
// every rank, whatever order backward finished their parameters in
// (NCCL needs the same calls in the same order on every rank); a bucket
// whose parameter backward did not reach on some rank is started by
// SyncGradients on every rank, after the ones before it, which are then
// all started too. SyncGradients starts what is left, waits for every
// all-reduce, then all-reduces the presence counts (and signatures),
// and scales and copies back exactly as without the overlap: the same
// collective calls, in the same order, on the same data.
//
// With NCCL (AsyncCollective): each rank has a communication stream of
// its own (non-blocking, made on first use, at cuda.PriorityHigh: the
// compute stream's priority, one level under the greatest, above every
// default stream). To
// start bucket i the rank queues the copies into the buffer on the
// compute stream, records an event there, makes the communication
// stream wait for it, queues ncclAllReduce on the communication stream
// and records a second event after it; SyncGradients makes the compute
// stream wait for those events before anything reads the buffers again
// (the scaling and copies back, the presence counts' all-reduce, which
// stays on the compute stream). The host never waits, and nothing
// touches a buffer between the two events: backward only reads the
// gradients, final by then, and writes others. Every collective call
// of a communicator is thus ordered on the device the same way on every
// rank: the buckets on the communication stream in order, each after
// its gradients; the later calls on the compute stream after the last
// bucket.
//
// The local group's ranks are AsyncCollectives too: a started call runs
// on a goroutine of its own after the calls the rank started before it,
// and the rank's other calls wait for those, so a rank's calls run in
// the order it made them, whichever DataParallel (several may share a
// rank) made them. Other Collectives (a test's): bucket i's AllReduceSum
// is called on a goroutine of its own that first waits for bucket
// i-1's, so the calls are the same, in the same order, and the rank's
// goroutine goes on with backward; SyncGradients waits for the last.
// For the local group the sums do not depend on when they are made:
// the overlapped path gives the other one's bits.
//
// Limits. With checkpointed blocks (a region's parameters are leaves
// of a graph the region differentiates in its own backward) autograd
// reports those parameters, and any reported while a region was still
// to run, only after the last region has run: correct, with less to
// overlap. A second backward pass after buckets were started and before
// SyncGradients would change gradients already sent: SyncGradients
// reports it as an error (and aborts the group); gradient accumulation
// runs every micro-batch but the last in DataParallel.NoSync, as with
// DDP's no_sync. A parameter has one gradient hook, so two
// DataParallels with the overlap cannot share parameters.
//
// # ZeRO-1
//
// ZeroAdamW replaces nn.AdamW after SyncGradients: the trainable
// parameters are one flat space cut into Size shards; rank r keeps
// AdamW's moments for shard r only (a Size-th of nn.AdamW's state),
// updates that shard, and one AllGather of the flat parameters hands
// every rank the whole update. AdamW being element-wise, the parameters
// are nn.AdamW's bit for bit.
//
// # The local group
//
// NewLocalGroup(n) gives n ranks in one process, one goroutine each, for
// tests and for data-parallel training on several CPU cores. A call is a
// barrier; the sum is done on the host in rank order in float64 and
// rounded once, so every rank gets the same bits. Errors never leave a
// rank waiting: a size, dtype or operation mismatch returns ErrMismatch
// on every rank, and a rank that fails (Abort, or a bad tensor) makes
// every pending and later call of the group return ErrAborted with the
// cause.
//
// # Tests
//
// local_test.go: the three collectives for 1 to 4 ranks, the rank-order
// sum (bit-identical ranks), mismatches (size, dtype, operation, a
// reduce-scatter not divisible by the ranks) and aborts, each failing
// every rank, under a timeout that fails the test on a hang.
// ddp_test.go: bucket assignment (reverse order, the cap, a parameter
// larger than a bucket alone, dtype boundaries, frozen parameters left
// out, the tiny GPT in one default bucket); the acceptance test, the
// tiny GPT (vocabulary 64, context 16, 2 layers, 2 heads, width 32, no
// dropout) on the CPU trained 4 AdamW steps with clipping by 2 and 4
// ranks, each with its slice of a global batch of 8 and 12 KiB buckets,
// against one rank with the whole batch: every rank's parameters are
// identical bit for bit after every step, and the mean loss is within
// 1e-5 (relative) and the parameters within 1e-5 (absolute) of the
// single rank's. The tolerance: the ranks' gradients are sums over fewer
// rows added in another order, so they differ from the single rank's by
// float32 rounding (about 1e-7 relative); AdamW's first steps divide the
// gradient by its own magnitude, which turns a relative error into an
// error of the step (3e-3 here) of the same relative size, and more for
// elements whose gradient is nearly zero. Measured: losses equal to 2e-7,
// parameters to 2.3e-6 after 4 steps. Also BroadcastParameters (ranks of
// different seeds, frozen parameters included, end with rank 0's bits),
// gradients missing on some or all ranks, and errors (ranks with
// different models, a rank that aborts) returned on every rank; each
// rank's Ctx holds the same bytes after every step, and every bucket
// was started during backward; a gradient kept in bfloat16 that some
// ranks lack gets the mean there in bfloat16 too. overlap_test.go: the overlapped path
// against NoOverlap with 2 and 4 ranks, AdamW and ZeRO-1: losses and
// parameters equal bit for bit on every rank after every step, and the
// same collective calls in the same order; a backward pass whose last
// node waits until the rank's collective is called (it is, with the
// overlap: the first bucket started before backward ended; without, the
// wait times out); NoSync's accumulation equal to NoOverlap's bit for
// bit, a second backward pass outside it, or one in it after a pass
// outside it, an error on every rank; the hooks set by New and removed
// by Release; two DataParallels sharing each rank's Collective, with
// and without the overlap (shared_collective_test.go). zero_test.go:
// ZeroAdamW on 2, 3 (padded shards) and 4 ranks gives nn.AdamW's losses
// and parameters bit for bit; the shard sizes. client_test.go, the
// package used as a program would, misuse included: ranks whose
// parameters differ (shape, order, names, which are trainable, number,
// dtype, none, the bucket size) an error wrapping ErrMismatch on every
// rank from BroadcastParameters, SyncGradients and ZeroAdamW's Step,
// never a hang; 1 to 6 ranks of a small MLP against one rank with the
// whole batch (gradients within 1e-5 relative, parameters within 1e-5
// after 5 AdamW steps) for bucket sizes from 1 byte to huge, with and
// without the overlap; a rank aborting mid-step, the group's reuse
// after it, Release twice; SyncGradients twice, or with no backward on
// one rank; a parameter unfrozen after New; gradients of the wrong
// shape; ZeroAdamW with fewer elements than ranks and a changing
// learning rate (nn.AdamW's bits); a Collective whose Rank is not in
// [0, Size); an abort from another goroutine. nccl_internal_test.go,
// on the CPU: NewNCCLGroup's and each call's checks (each failing the
// group with ErrAborted and the cause), the comparison of the ranks'
// calls (a rank running ahead; another size, dtype or operation is
// ErrMismatch naming both), Abort. nccl_gpu_test.go (skipped without a
// GPU or NCCL; STRATA_REQUIRE_GPU=1 makes that a failure): one rank on
// one GPU, each collective in float32, float64, float16 and bfloat16;
// an abort returning on every rank; DataParallel and ZeroAdamW over one
// NCCL rank against the same model trained on the GPU with no
// collective; the overlapped path (communication stream, events)
// against NoOverlap bit for bit, with every bucket started during
// backward (TestGPUNCCLOverlap); and, on a machine of 2 or more GPUs
// (skipped on one), the collectives, DataParallel and the overlap over
// every GPU against one GPU with the whole batch, within the tolerances
// above. The one-GPU tests pass on an H200 (NCCL 2.28.3, 2026-12-02);
// the multi-GPU ones have not run yet (no such machine was available).
package dist
