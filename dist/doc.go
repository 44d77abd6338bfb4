// Package dist is data-parallel training for strata, independent of the
// device: a Collective interface (all-reduce, reduce-scatter and
// all-gather over a group of ranks), an in-process group of goroutines
// that implements it (NewLocalGroup), and DataParallel, which averages
// gradients over the ranks in buckets as PyTorch's
// DistributedDataParallel (DDP) does; and ZeroAdamW, AdamW with its
// state sharded over the ranks (ZeRO stage 1).
//
// # Design
//
// Every rank holds a replica of the model and its optimizer, and runs the
// same program on its own goroutine (NewLocalGroup) or, with an NCCL
// Collective, its own GPU, each with its own tensor.Ctx. A step is:
// forward and backward on the rank's slice of the global batch, then
// DataParallel.SyncGradients, which replaces every gradient by its mean
// over the ranks, then clipping and the optimizer exactly as in a
// single-process run. Since the replicas start identical
// (BroadcastParameters makes them so) and every rank applies the same
// averaged gradients, they stay identical, bit for bit, without ever
// exchanging parameters; with equal slices of the batch (the same number
// of tokens per rank) the mean gradient is the whole batch's, so N ranks
// train as one rank on the global batch, up to float32 rounding.
//
//	coll := dist.NewLocalGroup(n)[rank] // on rank's goroutine
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
// dtype; frozen parameters are not reduced.
//
// A parameter that has no gradient on some rank (a branch that rank's
// batch did not take) contributes zeros, so every rank makes the same
// calls; a presence count, all-reduced once per step in one more small
// call, tells afterwards which parameters some rank gave a gradient:
// those get the mean everywhere, the others keep none, as in a
// single-process run.
//
// # NCCL
//
// The Collective's calls are NCCL's in-place collectives on one
// contiguous buffer (ncclAllReduce with sendbuff == recvbuff, and the
// in-place offsets of ncclReduceScatter and ncclAllGather): an
// NCCL-backed Collective (package nccl, by another change) passes the
// tensor's device pointer, element count and dtype to one call per
// bucket, and Abort maps to ncclCommAbort. DDP overlaps communication
// with backward: a hook on each gradient marks its bucket ready, and a
// ready bucket's all-reduce is queued on a second, communication stream
// (ordered after the gradient's kernels by an event) while backward
// continues on the compute stream. strata's device has one stream, so
// the overlap needs a second CUDA stream (and events) the runtime does
// not have yet; until then SyncGradients runs after backward, reducing
// the buckets one after the other. The bucket order and buffers are
// already the ones the overlap needs.
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
// rank's Ctx holds the same bytes after every step. zero_test.go:
// ZeroAdamW on 2, 3 (padded shards) and 4 ranks gives nn.AdamW's losses
// and parameters bit for bit; the shard sizes.
// Everything runs on the CPU, with no GPU and no NCCL.
package dist
