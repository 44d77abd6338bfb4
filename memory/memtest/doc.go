// Package memtest holds the test kit of the memory package, importable by
// every package that implements a memory.Backend (the host backend here,
// the CUDA device, managed and staging backends elsewhere).
//
// RunBackend is the one conformance suite: every backend runs it, in a few
// lines, with a constructor. It checks what a Pool relies on, so that a
// backend passing it can be pooled:
//
//   - regions of exactly the requested size, at a non-zero address, for
//     sizes from 1 byte to beyond a large segment;
//   - when the tier is host-accessible, a host view of exactly Size bytes
//     starting at Addr, that keeps what is written to it;
//   - live regions that never overlap (by device address and by host view);
//   - sizes <= 0 refused with memory.ErrInvalidArgument, impossible sizes
//     with memory.ErrOutOfMemory, a second Free with memory.ErrDoubleFree;
//   - Info consistent (0 <= free <= total) when it reports anything;
//   - a Pool over the backend that allocates, frees, empties its cache and
//     closes without error, giving every byte back.
//
// Two backends for tests come with it. FaultBackend wraps any backend with
// a byte budget and injected failures, and tracks every region it hands
// out, so tests can see that a pool returns all of them and never frees one
// twice. AddressBackend hands out address ranges with no memory behind them
// and no host view, like device memory seen from the CPU: pools can be
// tested at gigabyte sizes in microseconds.
//
// StreamSync is a memory.StreamSync whose streams are plain numbers: their
// work "finishes" when the test says so, or when a pool waits for it. It
// checks the protocol (every event token released exactly once, none used
// after release) and counts the calls, so tests of cross-stream use run
// without a GPU.
//
// Settled reads a manager's bytes in use once the garbage collector's
// cleanups have freed what nothing references: the baseline of the
// leak checks in the packages above. RunLeakChecked is their TestMain: it
// fails a suite whose tests let anything reach the collector's safety net
// (tensor.LeakedTensors).
package memtest
