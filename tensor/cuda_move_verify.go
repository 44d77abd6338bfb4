package tensor

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"os"
	"sync"

	"github.com/strata-ml/strata/cuda"
	"github.com/strata-ml/strata/memory"
)

// EnvMoveVerify=1 makes MoveTo on a GPU check every move it makes, at the
// cost of two synchronisations and two downloads a tensor: the bytes
// before the move against the bytes after it (a move that copies wrong),
// and the bytes a tensor brings to a move against those it left its last
// move with (bytes changed while they waited in a tier: a write through a
// stale address, a page mapped at two places); the bytes a move leaves on
// the device are set to 0xFF (NaNs), so that an op still reading them
// there gives NaNs. Each mismatch is reported on stderr with the tiers,
// addresses and the first differing byte, as are the first moves and
// every 100th; the run goes on. A diagnostic for the moves under expandable segments that
// changed the losses (cuda_move.go), not a setting for training.
const EnvMoveVerify = "STRATA_MOVE_VERIFY"

var moveVerify = os.Getenv(EnvMoveVerify) == "1"

// moveChecks is what EnvMoveVerify remembers: each moved storage's hash
// and tier after its last move.
var moveChecks struct {
	sync.Mutex
	last       map[*storage]moveCheck
	moves, bad int
}

type moveCheck struct {
	d    *cudaDevice
	sum  uint64
	tier memory.Tier
	addr uintptr
	move int
}

func fnv64(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// verifyBefore is EnvMoveVerify's look at st before its move: its bytes,
// checked against its last move's.
func (d *cudaDevice) verifyBefore(st *storage) []byte {
	b := d.readBack("MoveTo", st.alloc.Addr(), st.nbytes)
	moveChecks.Lock()
	defer moveChecks.Unlock()
	if c, ok := moveChecks.last[st]; ok && c.sum != fnv64(b) {
		moveChecks.bad++
		fmt.Fprintf(os.Stderr, "strata: %s: %s at %#x changed while in %s since move %d (to %s at %#x now)\n",
			EnvMoveVerify, memory.FormatBytes(st.nbytes), c.addr, c.tier, c.move, st.alloc.Tier(), st.alloc.Addr())
	}
	return b
}

// verifyAfter is EnvMoveVerify's look at st after its move from tier
// from at address addr, whose bytes were before.
func (d *cudaDevice) verifyAfter(st *storage, from memory.Tier, addr uintptr, before []byte) {
	after := d.readBack("MoveTo", st.alloc.Addr(), st.nbytes)
	moveChecks.Lock()
	defer moveChecks.Unlock()
	moveChecks.moves++
	if i := firstDiff(before, after); i >= 0 {
		moveChecks.bad++
		fmt.Fprintf(os.Stderr, "strata: %s: move %d of %s from %s at %#x to %s at %#x copied wrong: first difference at byte %d (%#x then %#x)\n",
			EnvMoveVerify, moveChecks.moves, memory.FormatBytes(st.nbytes), from, addr, st.alloc.Tier(), st.alloc.Addr(), i, before[i], after[i])
	}
	if n := moveChecks.moves; n <= 3 || n%100 == 0 {
		fmt.Fprintf(os.Stderr, "strata: %s: move %d, %s from %s at %#x to %s at %#x (%d wrong so far)\n",
			EnvMoveVerify, n, memory.FormatBytes(st.nbytes), from, addr, st.alloc.Tier(), st.alloc.Addr(), moveChecks.bad)
	}
	if from == memory.TierDevice {
		// The bytes left behind become NaNs: an op that still reads
		// them there (a stale address) gives NaNs, where the pool's cached
		// block would still hold the right values.
		err := d.ctx.MemsetD8(cuda.DevicePtr(addr), 0xFF, int(st.nbytes))
		if err == nil {
			err = d.ctx.Synchronize() // a synchronous memset may still run on the legacy stream
		}
		d.check("MoveTo", "verifying a move (poisoning the old bytes)", err)
	}
	if moveChecks.last == nil {
		moveChecks.last = map[*storage]moveCheck{}
	}
	moveChecks.last[st] = moveCheck{d: d, sum: fnv64(after), tier: st.alloc.Tier(), addr: st.alloc.Addr(), move: moveChecks.moves}
}

// forgetMove drops a released storage from EnvMoveVerify's memory, after
// checking that bytes it brought to the device are still what its move
// left there (a write through a stale address, a page mapped twice).
func forgetMove(st *storage) {
	moveChecks.Lock()
	c, ok := moveChecks.last[st]
	delete(moveChecks.last, st)
	moveChecks.Unlock()
	if !ok || c.tier != memory.TierDevice || st.alloc.Addr() != c.addr {
		return
	}
	if b := c.d.readBack("MoveTo", c.addr, st.nbytes); fnv64(b) != c.sum {
		moveChecks.Lock()
		moveChecks.bad++
		moveChecks.Unlock()
		fmt.Fprintf(os.Stderr, "strata: %s: %s at %#x changed on the device between move %d and its release\n",
			EnvMoveVerify, memory.FormatBytes(st.nbytes), c.addr, c.move)
	}
}

// firstDiff is the first index where a and b differ, -1 where none.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
