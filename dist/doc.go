// Package dist is data-parallel training for strata, independent of the
// device: a Collective interface (all-reduce, reduce-scatter and
// all-gather over a group of ranks), an in-process group for goroutines
// (NewLocalGroup), and DataParallel, which averages gradients over the
// ranks in buckets as PyTorch's DistributedDataParallel does.
package dist
