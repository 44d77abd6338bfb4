// Command bench-alloc measures strata's caching allocator against the CUDA
// driver's allocators, and replays PyTorch allocation traces through it.
//
// On the GPU (-device cuda, the default) it times an allocation plus a
// free, the pair a training step makes for every temporary, through
// memory.Pool over NewDeviceBackend ("pool"), through Manager.Alloc of a
// NewCUDAManager ("manager"), through cuMemAlloc+cuMemFree, and through
// cuMemAllocAsync+cuMemFreeAsync on a stream (synchronised once per timed
// run, as users of stream-ordered allocation do, with the default pool's
// release threshold at its maximum as PyTorch's cudaMallocAsync backend
// sets it). Workloads: 4 KiB, 1 MiB and 64 MiB pairs, and a mixed one of
// 256 live blocks of log-uniform sizes from 512 B to 32 MiB, one random
// block replaced per pair, the same sequence (from -seed) for every
// allocator. With -device cpu it runs the pool and manager over host
// memory only.
//
// -trace FILE (repeatable) replays a PyTorch allocation trace, the CSV
// format of bench/traces (action,addr,size,stream, with every action
// PyTorch's recorder writes: a trace of expandable_segments:True maps
// and unmaps pieces of segments, oom events are counted, snapshot and
// user_defined ones skipped; the header names the columns, in any order,
// others ignored; an oom's addr may be empty). Each trace is read and
// parsed once, for the checks before any work and for its replays, so it
// may come on a pipe (-trace /dev/stdin, -trace <(zcat t.csv.gz)); a
// directory or a device (/dev/zero) is refused, as is a line longer
// than 1 MiB (maxTraceLine). A
// trace may start mid-run: frees of blocks allocated before it are
// counted and not replayed, and segments freed that it never showed
// reserved take nothing off PyTorch's figure. Such a block was live from
// the trace's start until its free (of the size the free records): the
// peak live bytes counting those blocks (peak_live_lower_bound_bytes,
// noted under the table) bound what any allocator running the program
// held, and PyTorch's lower bound counts them among the blocks of
// segments held before the trace; when the trace frees such a segment,
// that bound is the most bytes at one moment of the segments the trace
// shows reserved plus the blocks outside them, never below the peak live
// bytes. Allocations and completed frees go through a fresh pool over the
// device backend (host memory on the CPU), once with classic segments and
// once with expandable ones (-segments picks one), and the peak reserved
// bytes are compared with the peak requested and with PyTorch's own, from
// the trace's segment events. The time per pool call is reported for each,
// with the backend calls (segments or pages taken and given back; pages
// mapped and unmapped and device synchronisations for expandable
// segments). -plots DIR replays each once more with the history recorded
// and writes a Chrome trace, a timeline and the segment map at the peak.
// -scale K multiplies every allocation by K: the same pattern at another
// model size, a check of generality until more traces are recorded.
// The expandable replays plan the trace's training steps
// (memory.PoolConfig.PlanSteps), as a CUDA memory.Manager's device tier does by
// default since session 37; -plan-steps=false replays them with the usual
// placement only.
//
// It prints markdown tables to stderr, and to stdout one JSON line per
// trace and one for the pairs. On the GPU only (the goal compares with
// cuMemAllocAsync, which -device cpu does not run) it adds a goal table
// with the bounds (mixed pair under 100 ns, every fixed size
// under 80 ns, both at least 20x faster than cuMemAllocAsync) for the
// classic and expandable pools, and the goal to the pairs' JSON line. A
// trace's JSON line has a "classic" and an "expandable" replay, each
// left out when that mode did not run (-segments, or no virtual memory).
// A flag the run would ignore is refused (-seed and -mintime set only the
// pairs: not with -no-bench), and so is -segments expandable where the
// backend has no virtual memory (no replay would run). Exit status: 0, 2
// for a bad flag (-device cuda without a usable GPU too), 1 for a failure
// of the run, writing the results to stdout or the tables to stderr
// included, and 130 or 143 when SIGINT or SIGTERM comes while -plots
// writes a picture (the write abandoned, the file there before kept, no
// temporary file left).
//
// # Design
//
// Each allocator (allocators.go) is a small adapter with its own table of
// handles indexed by slot, so every allocator pays the same overhead (one
// interface call per operation) and none boxes a handle per call. For each
// workload (workload.go) every allocator is set up and warmed, and finds
// by runs of growing length how many pairs last -mintime; then -reps
// rounds (5 by default) give each allocator one timed run, the first one
// rotating, so a stall of a shared machine (the GPU hosts are noisy: the
// same binary runs 1.5x slower on some of their cores than on others)
// hits the allocators alike. A row reports the median run, the fastest and
// the slowest, with the driver calls and backend allocations per pair.
// The trace replay (trace.go) frees at free_completed, as PyTorch's pool
// does, and checks that the pool's peak requested bytes equal the trace's
// before comparing peak reserved bytes. report.go prints the tables.
//
// Usage:
//
//	go build -o bench-alloc ./examples/bench-alloc
//	./bench-alloc -trace bench/traces/trace-char-fp32.csv -trace bench/traces/trace-char-fp16-ckpt.csv
//	./bench-alloc -device cpu
//	./bench-alloc -device cpu -no-bench -plots out -trace bench/traces/trace-char-fp32.csv
package main
