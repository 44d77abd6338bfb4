package tensor

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/strata-ml/strata/memory"
)

// storage is a reference-counted allocation from a device's memory
// manager. Views share one storage; it is returned to the pool when the
// last tensor referring to it is released.
type storage struct {
	alloc  *memory.Allocation
	nbytes int64
	refs   atomic.Int32
	owner  *Ctx // the context it was allocated in, for Ctx.BytesInUse
	// fence, when set, is work queued on another stream of a CUDA device
	// that writes these bytes (an overlapped or pipelined optimizer step
	// on the side stream, cuda_side.go; a move on the copy stream,
	// cuda_move.go; the copy ring's write-back, cuda_ring.go): the first
	// use on the device's stream waits for it.
	fence atomic.Pointer[sideFence]
	// guard is the device whose EnvMemoryGuard checks this storage (nil:
	// none), op the op that made it (cuda_memguard.go).
	guard *cudaDevice
	op    string
	// version counts the writes made in place to these bytes (version.go).
	version atomic.Uint64
}

func (s *storage) retain() { s.refs.Add(1) }

func (s *storage) release() {
	switch n := s.refs.Add(-1); {
	case n == 0:
		s.joinFence() // the pool may hand the bytes out on the device's stream at once
		s.owner.live.Add(-s.nbytes)
		if moveVerify {
			forgetMove(s)
		}
		if s.guard != nil {
			s.guard.checkGuard(s)
		}
		if deferFree(s.alloc) { // a CUDA graph being captured may still use it (graph.go)
			return
		}
		if err := s.alloc.Free(); err != nil {
			panic(fmt.Sprintf("tensor: freeing storage: %v", err)) // a bug: storage frees exactly once
		}
	case n < 0:
		panic("tensor: storage released more often than retained")
	}
}

// host returns the storage bytes as seen from the CPU, for an op that
// reads or writes them: the access is counted (memory.Allocation.Touch),
// for the placement scheduler.
func (s *storage) host() []byte {
	s.alloc.Touch()
	return s.alloc.Host()
}

// ref is the part of a Tensor that its cleanup (the leak safety net) sees.
type ref struct {
	st *storage
	// released is read by other goroutines too (Tensor.Released).
	released atomic.Bool
	byScope  bool   // released by the closing of the scope that owned it
	op       string // the op that made the tensor, for leak reports
	stack    string // where it was made, when STRATA_DEBUG is set
}

// debugLeaks reports tensors collected by the GC without Release, each
// with the goroutine stack that made it (recorded at every tensor's
// creation, so only when STRATA_DEBUG is set).
var debugLeaks = os.Getenv("STRATA_DEBUG") != ""

// leaked counts tensors that were garbage collected without being released
// (their storage is then returned by the safety net).
var leaked atomic.Int64

// LeakedTensors is the number of tensors the garbage collector found
// unreleased so far. In a correct program using scopes it stays 0.
func LeakedTensors() int64 { return leaked.Load() }

func cleanupRef(r *ref) {
	if r.released.Load() {
		return
	}
	leaked.Add(1)
	if debugLeaks {
		fmt.Fprintf(os.Stderr, "strata: leaked tensor from %s (%d bytes); release it or create it inside a tensor.Scope; made by\n%s\n", r.op, r.st.nbytes, r.stack)
	}
	r.st.release()
}

// newStorage allocates nbytes on dev for role, asked for by op (the name
// the memory manager's history and snapshots show).
func newStorage(op string, dev Device, nbytes int64, role memory.Role) (*storage, error) {
	if nbytes == 0 {
		nbytes = 1 // zero-element tensors still get a distinct block
	}
	var stream memory.Stream
	if sd, ok := dev.(interface{ memStream() memory.Stream }); ok {
		stream = sd.memStream()
	}
	g := guardDevice(dev)
	size := nbytes
	if g != nil && !memoryPoison {
		size += guardBytes
	}
	a, err := dev.Memory().AllocOp(size, role, stream, op)
	if err != nil {
		return nil, err
	}
	s := &storage{alloc: a, nbytes: nbytes}
	s.refs.Store(1)
	if g != nil {
		s.guard, s.op = g, op
		if !memoryPoison {
			g.setGuard(s)
		}
	}
	return s, nil
}

// castSlice reinterprets host bytes as a slice of T.
func castSlice[T any](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

// noteOrigin records, when STRATA_DEBUG is set, the stack that made t for
// leak reports, and then guards every tensor from its creation.
func noteOrigin(t *Tensor) {
	if debugLeaks {
		b := make([]byte, 8192)
		t.ref.stack = string(b[:runtime.Stack(b, false)])
		guard(t)
	}
}

// guard wires the leak safety net to t, once. A tensor that a scope owns
// needs none while it does: the scope references it until it closes and
// releases it. So the net is attached when a tensor is owned by no scope:
// made outside any (an orphan, a tensor of a context with no open scope),
// or taken out of its scope by Keep. runtime.AddCleanup was a quarter to a
// half of the host time of a small op (its record goes into a list per
// span that grows with the live tensors of the span). With STRATA_DEBUG
// set every tensor is guarded from its creation, which also catches the
// tensors of a scope left open in a context that was dropped.
func guard(t *Tensor) {
	if !t.guarded {
		t.guarded = true
		runtime.AddCleanup(t, cleanupRef, t.ref)
	}
}
