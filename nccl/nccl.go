package nccl

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/strata-ml/strata/cuda"
)

// GetUniqueID makes the identifier of a new communicator. Call it on one
// rank and hand the result to every rank's CommInitRank.
func GetUniqueID() (UniqueID, error) {
	var id UniqueID
	l, err := getLib()
	if err != nil {
		return id, err
	}
	if r := Result(ccall(l.getUniqueID.addr, uintptr(unsafe.Pointer(&id)))); r != Success {
		return UniqueID{}, l.newError(l.getUniqueID.name, "", r, 0)
	}
	return id, nil
}

// Comm is an NCCL communicator: one rank's membership of a group of
// ranks, bound to one GPU. Its methods may be called from any goroutine
// but serialise on a mutex (NCCL forbids concurrent use of one
// communicator).
type Comm struct {
	lib                 *lib
	h                   uintptr // ncclComm_t
	rank, count, device int

	mu        sync.Mutex
	destroyed bool         // guarded by mu
	use       atomic.Int32 // commIdle, commInCall or commFreeing
	aborted   atomic.Bool  // Abort ran (or runs): every method refuses
}

// What a communicator's handle is doing (Comm.use). A method moves it
// from commIdle to commInCall, under the lock, just before it hands the
// handle to NCCL, and back after; the one Destroy or Abort that frees the
// communicator moves it to commFreeing. Abort does not wait for the lock,
// so a call that has passed its checks but not yet entered NCCL learns
// here that the handle is being freed, and does not pass it on.
const (
	commIdle int32 = iota
	commInCall
	commFreeing
)

// enter marks c's handle as in a call into NCCL; false when it is being
// freed (aborted). The caller holds c.mu and calls leave after the call.
func (c *Comm) enter() bool {
	if testHookEnter != nil {
		testHookEnter(c)
	}
	return c.use.CompareAndSwap(commIdle, commInCall)
}

// leave ends enter's call (unless an Abort has taken the handle since).
func (c *Comm) leave() { c.use.CompareAndSwap(commInCall, commIdle) }

// testHookEnter, for tests, runs in enter before the handle is claimed.
var testHookEnter func(*Comm)

// CommInitRank joins rank (0 <= rank < nranks) to the communicator id
// names, on the GPU whose CUDA context is current on the calling OS
// thread: NCCL takes the device from it. The caller must therefore lock
// its goroutine to its thread and make the context current around the
// call, which cuda.Context.Do does:
//
//	err := ctx.Do(func() (err error) { comm, err = nccl.CommInitRank(n, id, r); return err })
//
// CommInitRank blocks until all nranks ranks have joined, so in one
// process the ranks must call it from different goroutines (each in its
// own Do) or use CommInitAll.
func CommInitRank(nranks int, id UniqueID, rank int) (*Comm, error) {
	const op = "CommInitRank"
	if nranks < 1 {
		return nil, invalidArg(op, "%d ranks: a communicator has at least 1", nranks)
	}
	if nranks > math.MaxInt32 {
		return nil, invalidArg(op, "%d ranks: more than NCCL's limit of %d (a C int)", nranks, math.MaxInt32)
	}
	if rank < 0 || rank >= nranks {
		return nil, invalidArg(op, "rank %d out of range [0, %d)", rank, nranks)
	}
	if id == (UniqueID{}) {
		return nil, invalidArg(op, "zero unique id: make one with GetUniqueID on one rank and pass it to all")
	}
	l, err := getLib()
	if err != nil {
		return nil, err
	}
	var h uintptr
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r, err := l.callInitRank(&h, nranks, &id, rank)
	if err != nil {
		return nil, err
	}
	if r != Success {
		return nil, l.newError(l.commInitRank.name, fmt.Sprintf("rank %d of %d", rank, nranks), r, 0)
	}
	c, err := l.newComm(h)
	if err != nil {
		ccall(l.commDestroy.addr, h) // NCCL made it and no Comm holds it: free it, as CommInitAll does
		return nil, err
	}
	return c, nil
}

// callInitRank calls ncclCommInitRank(ncclComm_t*, int nranks,
// ncclUniqueId id, int rank), whose third argument is a 128-byte struct
// passed by value. The System V AMD64 ABI passes such a struct in memory:
// a copy on the stack, while the ints after it still take the next free
// registers, so the words go after the six register arguments. AAPCS64
// passes a composite larger than 16 bytes by reference to a copy made by
// the caller, in the next register.
func (l *lib) callInitRank(h *uintptr, nranks int, id *UniqueID, rank int) (Result, error) {
	switch runtime.GOARCH {
	case "amd64":
		// Six register words (h, set by ccallOut; nranks; rank; three
		// unused), then the id's sixteen words on the stack.
		args := make([]uintptr, 6+len(id)/8)
		args[1], args[2] = uintptr(nranks), uintptr(rank)
		for i := range len(id) / 8 {
			args[6+i] = uintptr(*(*uint64)(unsafe.Pointer(&id[8*i])))
		}
		return Result(ccallOut(l.commInitRank.addr, uintptr(unsafe.Pointer(h)), args)), nil
	case "arm64":
		idCopy := *id // the callee may write to its copy
		return Result(ccall(l.commInitRank.addr, uintptr(unsafe.Pointer(h)), uintptr(nranks),
			uintptr(unsafe.Pointer(&idCopy)), uintptr(rank))), nil
	}
	return 0, fmt.Errorf("nccl: CommInitRank: passing ncclUniqueId by value is not implemented on %s: %w",
		runtime.GOARCH, ErrNotAvailable)
}

// ccallOut calls fn with args, whose first word it sets to out, the
// address of a Go variable: converted at the call site, out stays alive
// and in place for the call (go:uintptrescapes).
//
//go:uintptrescapes
func ccallOut(fn uintptr, out uintptr, args []uintptr) uintptr {
	args[0] = out
	return ccall(fn, args...)
}

// CommInitAll makes one communicator per device, all in one process, in
// one call: the communicator of devices[i] has rank i. A nil or empty
// devices is refused (NCCL's "first n devices" shortcut hides which
// devices are used). Each device may appear once.
func CommInitAll(devices []int) ([]*Comm, error) {
	const op = "CommInitAll"
	if len(devices) == 0 {
		return nil, invalidArg(op, "no devices")
	}
	if len(devices) > math.MaxInt32 {
		return nil, invalidArg(op, "%d devices: more than a C int counts", len(devices))
	}
	seen := make(map[int]bool, len(devices))
	dev32 := make([]int32, len(devices))
	for i, d := range devices {
		if d < 0 {
			return nil, invalidArg(op, "negative device ordinal %d", d)
		}
		if d > math.MaxInt32 {
			return nil, invalidArg(op, "device ordinal %d does not fit a C int", d)
		}
		if seen[d] {
			return nil, invalidArg(op, "device %d listed twice", d)
		}
		seen[d] = true
		dev32[i] = int32(d)
	}
	l, err := getLib()
	if err != nil {
		return nil, err
	}
	hs := make([]uintptr, len(devices))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := Result(ccall(l.commInitAll.addr, uintptr(unsafe.Pointer(&hs[0])), uintptr(len(devices)),
		uintptr(unsafe.Pointer(&dev32[0])))); r != Success {
		return nil, l.newError(l.commInitAll.name, fmt.Sprintf("devices %v", devices), r, 0)
	}
	comms := make([]*Comm, len(hs))
	for i, h := range hs {
		c, err := l.newComm(h)
		if err != nil {
			for _, h := range hs {
				ccall(l.commDestroy.addr, h)
			}
			return nil, err
		}
		comms[i] = c
	}
	return comms, nil
}

// newComm reads the communicator's rank, size and device once.
func (l *lib) newComm(h uintptr) (*Comm, error) {
	c := &Comm{lib: l, h: h}
	var rank, count, dev int32
	for _, q := range []struct {
		sym *symbol
		out *int32
	}{{&l.commUserRank, &rank}, {&l.commCount, &count}, {&l.commCuDevice, &dev}} {
		if r := Result(ccall(q.sym.addr, h, uintptr(unsafe.Pointer(q.out)))); r != Success {
			return nil, l.newError(q.sym.name, "", r, h)
		}
	}
	c.rank, c.count, c.device = int(rank), int(count), int(dev)
	return c, nil
}

// Rank returns the communicator's rank (0 for a nil Comm).
func (c *Comm) Rank() int {
	if c == nil {
		return 0
	}
	return c.rank
}

// Count returns the number of ranks (0 for a nil Comm).
func (c *Comm) Count() int {
	if c == nil {
		return 0
	}
	return c.count
}

// Device returns the CUDA device ordinal the communicator works on (-1
// for a nil Comm).
func (c *Comm) Device() int {
	if c == nil {
		return -1
	}
	return c.device
}

func (c *Comm) String() string {
	if c == nil {
		return "nil communicator"
	}
	return fmt.Sprintf("rank %d of %d (cuda:%d)", c.rank, c.count, c.device)
}

// Destroy waits for the communicator's queued work and frees it.
// Destroying twice is a no-op, and so is destroying an aborted one,
// except one whose ncclCommAbort failed, which Destroy frees with
// ncclCommAbort again (it does not wait for its work).
func (c *Comm) Destroy() error {
	if c == nil {
		return invalidArg("Comm.Destroy", "nil communicator")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.destroyed {
		return nil
	}
	if !c.use.CompareAndSwap(commIdle, commFreeing) {
		return nil // aborted
	}
	// An aborted communicator still here is one whose ncclCommAbort
	// failed: it is freed as Abort would, without waiting for its work.
	free, h := &c.lib.commDestroy, c.h
	if c.aborted.Load() {
		free, h = &c.lib.commAbort, 0 // as Abort reports it
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := Result(ccall(free.addr, c.h)); r != Success {
		c.use.Store(commIdle)
		return c.lib.newError(free.name, c.String(), r, h)
	}
	c.destroyed = true
	return nil
}

// Abort abandons the communicator (ncclCommAbort): the collectives it
// has queued that have not completed stop (their kernels return, their
// results unspecified), and its resources are freed. Unlike Destroy it
// neither waits for queued work nor takes the communicator's lock, so
// another goroutine can call it while a rank waits: it is how a group
// whose member failed between collectives unblocks the others, whose
// kernels would otherwise wait on the GPU for the missing peer forever.
// Every later method returns an error naming the abort; Destroy after it
// does nothing (unless ncclCommAbort failed: the communicator is not
// freed then, and Destroy tries again); aborting twice, or a destroyed
// communicator, is a no-op, and so is aborting one that a Destroy is
// freeing.
//
// A call of another method that is inside NCCL when Abort frees the
// communicator is NCCL's concern: ncclCommAbort is documented to stop a
// communicator in use from another thread. One that holds the lock but
// has not handed the communicator to NCCL yet does not: it returns the
// abort's error (Comm.enter). A library without
// ncclCommAbort (before NCCL 2.4) gives an error wrapping ErrNotAvailable.
func (c *Comm) Abort() error {
	if c == nil {
		return invalidArg("Comm.Abort", "nil communicator")
	}
	if c.lib.commAbort.addr == 0 {
		return fmt.Errorf("nccl: Comm.Abort: %s lacks ncclCommAbort (NCCL 2.4+): %w", c.lib.path, ErrNotAvailable)
	}
	if !c.aborted.CompareAndSwap(false, true) {
		return nil
	}
	// Without the lock when a call holds it (it may be the one waiting);
	// with it otherwise, so that no call starts while NCCL frees.
	if c.mu.TryLock() {
		defer c.mu.Unlock()
	}
	for {
		s := c.use.Load()
		if s == commFreeing {
			return nil // destroyed, or a Destroy holding the lock frees it
		}
		// From commIdle, a call holding the lock that has not entered
		// NCCL yet will not (enter fails); from commInCall, one is inside.
		if c.use.CompareAndSwap(s, commFreeing) {
			break
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := Result(ccall(c.lib.commAbort.addr, c.h)); r != Success {
		c.use.Store(commIdle) // not freed: a later Destroy frees it
		return c.lib.newError(c.lib.commAbort.name, c.String(), r, 0)
	}
	return nil
}

// Aborted reports whether Abort was called.
func (c *Comm) Aborted() bool { return c != nil && c.aborted.Load() }

// AsyncError returns the error an asynchronous operation of the
// communicator has met (a peer gone, a network failure), or nil.
func (c *Comm) AsyncError() error {
	if err := c.usable("Comm.AsyncError"); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Again under the lock: a Destroy may have run while this call waited.
	if err := c.usableLocked("Comm.AsyncError"); err != nil {
		return err
	}
	l := c.lib
	if l.commGetAsyncError.addr == 0 {
		return nil
	}
	if !c.enter() {
		return invalidArg("Comm.AsyncError", "%s was aborted", c)
	}
	defer c.leave()
	var async int32
	if r := Result(ccall(l.commGetAsyncError.addr, c.h, uintptr(unsafe.Pointer(&async)))); r != Success {
		return l.newError(l.commGetAsyncError.name, c.String(), r, c.h)
	}
	if Result(async) != Success {
		return l.newError("asynchronous error", c.String(), Result(async), c.h)
	}
	return nil
}

// usable is the check made before taking the lock: a nil or aborted
// communicator. Whether it was destroyed is known only under the lock
// (usableLocked), which every call into NCCL takes.
func (c *Comm) usable(op string) error {
	if c == nil {
		return invalidArg(op, "nil communicator")
	}
	if c.aborted.Load() {
		return invalidArg(op, "%s was aborted", c)
	}
	return nil
}

// usableLocked is usable for a caller that holds c.mu.
func (c *Comm) usableLocked(op string) error {
	if err := c.usable(op); err != nil {
		return err
	}
	if c.destroyed {
		return invalidArg(op, "%s was destroyed", c)
	}
	return nil
}

// check validates what every collective takes: a usable communicator, a
// count, an element type and a stream of the communicator's device.
func (c *Comm) check(op string, count int, dt DataType, s *cuda.Stream) error {
	if err := c.usable(op); err != nil {
		return err
	}
	if count < 0 {
		return invalidArg(op, "negative count %d", count)
	}
	if !dt.valid() {
		return invalidArg(op, "unknown data type %s", dt)
	}
	if s != nil {
		if ctx := s.Context(); ctx != nil && int(ctx.Device()) != c.device {
			return invalidArg(op, "%s is on %s, the communicator on cuda:%d", s, ctx.Device(), c.device)
		}
	}
	return nil
}

// collective runs one collective (op names it) under the communicator's
// lock, on a locked thread.
func (c *Comm) collective(op string, sym *symbol, detail func() string, args ...uintptr) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(op); err != nil {
		return err
	}
	if !c.enter() { // aborted since the check, the handle freed
		return invalidArg(op, "%s was aborted", c)
	}
	defer c.leave()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := Result(ccall(sym.addr, args...)); r != Success {
		return c.lib.newError(sym.name, detail(), r, c.h)
	}
	return nil
}

// AllReduce combines count elements of type dt from every rank's send
// with op and writes the result to every rank's recv (send == recv works
// in place). The work is queued on s (nil: the legacy default stream of
// the current context); the call returns once it is queued. With several
// communicators driven by one goroutine, call it inside Group.
func (c *Comm) AllReduce(send, recv cuda.DevicePtr, count int, dt DataType, op RedOp, s *cuda.Stream) error {
	const name = "AllReduce"
	if err := c.check(name, count, dt, s); err != nil {
		return err
	}
	if !op.valid() {
		return invalidArg(name, "unknown reduction %s", op)
	}
	if send == 0 || recv == 0 {
		return invalidArg(name, "null buffer (send %s, recv %s)", send, recv)
	}
	return c.collective(name, &c.lib.allReduce, func() string {
		return fmt.Sprintf("%d %s %s, %s", count, dt, op, c)
	}, uintptr(send), uintptr(recv), uintptr(count), uintptr(dt), uintptr(op), c.h, s.Handle())
}

// ReduceScatter combines the ranks' send buffers (recvCount*Count()
// elements each) with op and leaves block i of the result, recvCount
// elements, in rank i's recv.
func (c *Comm) ReduceScatter(send, recv cuda.DevicePtr, recvCount int, dt DataType, op RedOp, s *cuda.Stream) error {
	const name = "ReduceScatter"
	if err := c.check(name, recvCount, dt, s); err != nil {
		return err
	}
	if !op.valid() {
		return invalidArg(name, "unknown reduction %s", op)
	}
	if send == 0 || recv == 0 {
		return invalidArg(name, "null buffer (send %s, recv %s)", send, recv)
	}
	return c.collective(name, &c.lib.reduceScatter, func() string {
		return fmt.Sprintf("%d %s %s per rank, %s", recvCount, dt, op, c)
	}, uintptr(send), uintptr(recv), uintptr(recvCount), uintptr(dt), uintptr(op), c.h, s.Handle())
}

// AllGather gathers sendCount elements from every rank into every rank's
// recv (sendCount*Count() elements), rank i's at offset i*sendCount.
func (c *Comm) AllGather(send, recv cuda.DevicePtr, sendCount int, dt DataType, s *cuda.Stream) error {
	const name = "AllGather"
	if err := c.check(name, sendCount, dt, s); err != nil {
		return err
	}
	if send == 0 || recv == 0 {
		return invalidArg(name, "null buffer (send %s, recv %s)", send, recv)
	}
	return c.collective(name, &c.lib.allGather, func() string {
		return fmt.Sprintf("%d %s per rank, %s", sendCount, dt, c)
	}, uintptr(send), uintptr(recv), uintptr(sendCount), uintptr(dt), c.h, s.Handle())
}

// Broadcast copies count elements from the root rank's send to every
// rank's recv. send is read on the root only and may be 0 elsewhere.
func (c *Comm) Broadcast(send, recv cuda.DevicePtr, count int, dt DataType, root int, s *cuda.Stream) error {
	const name = "Broadcast"
	if err := c.check(name, count, dt, s); err != nil {
		return err
	}
	if root < 0 || root >= c.count {
		return invalidArg(name, "root %d out of range [0, %d)", root, c.count)
	}
	if recv == 0 || (send == 0 && c.rank == root) {
		return invalidArg(name, "null buffer (send %s, recv %s) on rank %d, root %d", send, recv, c.rank, root)
	}
	return c.collective(name, &c.lib.broadcast, func() string {
		return fmt.Sprintf("%d %s from root %d, %s", count, dt, root, c)
	}, uintptr(send), uintptr(recv), uintptr(count), uintptr(dt), uintptr(root), c.h, s.Handle())
}

// GroupStart opens a group: the collectives called until GroupEnd are
// launched together, which one goroutine driving several communicators
// needs (each blocking call would wait for ranks not yet called). NCCL
// keeps the group per OS thread, so GroupStart, the calls and GroupEnd
// must run on one thread: lock the goroutine (runtime.LockOSThread)
// around them, or use Group, which does.
func GroupStart() error {
	l, err := getLib()
	if err != nil {
		return err
	}
	if r := Result(ccall(l.groupStart.addr)); r != Success {
		return l.newError(l.groupStart.name, "", r, 0)
	}
	return nil
}

// GroupEnd closes the group GroupStart opened on this thread and launches
// its collectives.
func GroupEnd() error {
	l, err := getLib()
	if err != nil {
		return err
	}
	if r := Result(ccall(l.groupEnd.addr)); r != Success {
		return l.newError(l.groupEnd.name, "", r, 0)
	}
	return nil
}

// Group runs fn between GroupStart and GroupEnd on one locked OS thread.
// GroupEnd runs even when fn fails or panics (NCCL requires the group to
// be closed); fn's error is returned first, its panic goes on once the
// group is closed.
func Group(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := GroupStart(); err != nil {
		return err
	}
	ended := false
	defer func() {
		if !ended {
			// fn panicked: close the group before the thread goes back to
			// the pool, where it would hold the next collectives of
			// whichever goroutine runs there, never launched.
			_ = GroupEnd()
		}
	}()
	ferr := fn()
	ended = true
	eerr := GroupEnd()
	if ferr != nil {
		return ferr
	}
	return eerr
}
