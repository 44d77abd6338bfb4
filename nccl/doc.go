// Package nccl binds NVIDIA's collective communication library (NCCL 2.x,
// libnccl.so.2) at run time, without cgo, for data-parallel training:
// every GPU holds a copy of the model, computes the gradients of its
// share of the batch, and AllReduce sums (or averages) them across GPUs
// before the optimizer step. It sits beside package cuda, in its style,
// and imports only cuda (for device pointers and streams).
//
// # Loading
//
// Nothing is loaded until the first call that needs NCCL; then libnccl is
// opened once per process (safely from any number of goroutines) and the
// outcome cached. STRATA_NCCL_LIB names the file, and then nothing else is
// tried; otherwise libnccl.so.2, then libnccl.so, through the dynamic
// loader's own search (LD_LIBRARY_PATH, the ld.so cache), then in
// $NCCL_HOME, $CUDA_HOME and $CUDA_PATH (lib64, lib), /usr/local/cuda and
// the versioned toolkits, and the distribution's library folders. A
// failure names every file tried with the loader's message for each and
// how to fix it, and wraps ErrNotAvailable; so does a library that lacks
// a function this package calls, or whose ncclGetVersion fails. Init reports the outcome early and
// Available says whether NCCL loads; a program built with CGO_ENABLED=0
// runs unchanged with and without NCCL.
//
// # Calls and errors
//
// Every C function is called through purego.SyscallN with integer
// arguments. One needs care: ncclCommInitRank takes the 128-byte
// ncclUniqueId by value, which the System V AMD64 ABI passes as sixteen
// words on the stack (the ints after it still take registers) and AAPCS64
// as a pointer to a caller-made copy; callInitRank builds both layouts. A
// failed call becomes an *Error: the C function (Op), what it was asked
// (Detail), the ncclResult_t (Code) and NCCL's text (Msg:
// ncclGetErrorString, then ncclGetLastError where the library has it,
// 2.13+). Misuse caught before any call into NCCL (a negative count, a nil
// or destroyed communicator, a null buffer, a rank or root out of range,
// an unknown DataType or RedOp, a stream of another device) is an error
// naming the operation and the values, wrapping ErrInvalidArgument, as is
// an *Error whose code is ncclInvalidArgument or ncclInvalidUsage.
//
// # Processes, goroutines and threads
//
// NCCL supports two layouts, and so does this package:
//
//   - One process per GPU (what torchrun and mpirun launch, and what this
//     package recommends for training): rank 0 calls GetUniqueID, the
//     launcher passes the 128 bytes to every process (a file, an
//     environment variable in hex, a socket), and each process calls
//     CommInitRank on its own GPU. Each process then has one context, so
//     package cuda stays on its fast single-context path, and a crash
//     takes down one rank, not the whole job.
//   - One process driving several GPUs: CommInitAll makes one
//     communicator per device in one call, and the collectives of all of
//     them are issued inside Group from one goroutine; or one goroutine
//     per GPU calls CommInitRank inside its device's cuda.Context.Do and
//     issues its own collectives. The tests use both. Package dist's
//     NCCLGroup (and so train-gpt -gpus) ships this layout, with
//     CommInitAll and a goroutine a GPU; dist's doc says why.
//
// CUDA and NCCL keep per-OS-thread state and goroutines move between
// threads. NCCL takes a communicator's device from the CUDA context
// current on the calling thread when CommInitRank runs, so the caller
// locks its goroutine to its thread and makes the context current for
// the call, which cuda.Context.Do does:
//
//	err := ctx.Do(func() (err error) { comm, err = nccl.CommInitRank(n, id, rank); return err })
//
// NCCL's group state (GroupStart to GroupEnd) is per thread too: Group
// runs its function on one locked thread; callers of GroupStart and
// GroupEnd must lock their goroutine themselves. Each call here locks its
// goroutine to its thread for its own duration, and a communicator's
// methods serialise on a mutex, since NCCL forbids using one communicator
// from two threads at once. Collectives only queue work on the stream
// given (a *cuda.Stream of the communicator's device, whose Handle is the
// CUstream NCCL takes; nil is the legacy default stream); synchronise the
// stream to wait for the result. Run them with the communicator's context
// current (inside ctx.Do) when the default stream is used.
//
// Comm.Abort (ncclCommAbort) is the exception to the lock: it does not
// wait for it, so one goroutine can abort the communicator another rank's
// collective is stuck in; a group whose member failed aborts every
// member's communicator so that no rank waits for the missing one
// (package dist's NCCL Collective does).
//
// # What is verified where
//
// Without a GPU (CI, every run): discovery and its messages (a bogus
// STRATA_NCCL_LIB, a library that is not NCCL, the search order and
// folders), the behaviour without NCCL (every entry point returns the
// same cached error from concurrent first calls), the enums' values and
// names against nccl.h, error formatting and errors.Is, and every
// argument check, made before any call into C. Where a C compiler exists,
// testdata/fakenccl.c is built into a stand-in libnccl that records its
// arguments: the tests check through it the whole calling layer, the
// unique id passed by value to ncclCommInitRank byte for byte, each
// collective's arguments in C order, group calls, Abort (once; every
// later call refused, one that had passed its checks but not called NCCL
// too; racing Destroy, the communicator freed once; after a failed
// ncclCommAbort, freed by Destroy), and
// failures carrying
// ncclGetErrorString and ncclGetLastError's text. With NCCL and a GPU
// (gpu_test.go, skipped without them; STRATA_REQUIRE_GPU=1 makes a skip a
// failure): a 1-rank communicator's AllReduce, Broadcast, AllGather and
// ReduceScatter on one GPU; with two or more GPUs, AllReduce (sum and
// average), ReduceScatter, AllGather and Broadcast across every device
// with communicators from CommInitAll driven in a group, and AllReduce
// with one goroutine per GPU joined through GetUniqueID and CommInitRank.
package nccl
