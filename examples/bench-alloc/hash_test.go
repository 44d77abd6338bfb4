package main

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memtest"
)

// traceHashes names the file TestTraceHashes writes its hashes to.
var traceHashes = flag.String("trace-hashes", "", "write TestTraceHashes' hash of every replay configuration to this file")

// TestTraceHashes replays the shared traces (and a random workload) in
// some forty configurations and hashes everything the pool decides: each
// allocation's segment and offset, the pool's Reserved, InactiveSplit,
// Allocated and Active bytes after every call, and a full snapshot of the
// segments every 500 calls. A change to the pool's internals that keeps
// its answers (best fit, splitting, coalescing, segments) keeps every
// hash; comparing the files of two builds says whether it did:
//
//	go test ./examples/bench-alloc -run TestTraceHashes -trace-hashes /tmp/before.txt
//
// It is skipped without -trace-hashes.
func TestTraceHashes(t *testing.T) {
	if *traceHashes == "" {
		t.Skip("no -trace-hashes file")
	}
	var lines []string
	for _, file := range []string{"trace-char-fp32.csv", "trace-char-fp16-ckpt.csv"} {
		path := filepath.Join(traceDir, file)
		evs, err := readTrace(path)
		require.NoError(t, err)
		_, ops0, slots, err := scanTrace(path, evs, 1)
		require.NoError(t, err)
		for _, scale := range []float64{1, 0.5, 0.13, 0.31, 2.3, 3.1} {
			ops := slices.Clone(ops0)
			for i := range ops {
				if !ops[i].free {
					ops[i].size = max(1, int64(math.Round(float64(ops[i].size)*scale)))
				}
			}
			alt := slices.Clone(ops)
			for i := range alt {
				alt[i].stream = memory.Stream(alt[i].slot % 2)
			}
			for _, c := range []struct {
				name string
				ops  []poolOp
				cfg  memory.PoolConfig
			}{
				{"classic", ops, memory.PoolConfig{}},
				{"classic-maxsplit40M", ops, memory.PoolConfig{MaxSplitSize: 40 << 20}},
				{"classic-2streams", alt, memory.PoolConfig{}},
				{"expandable", ops, memory.PoolConfig{Expandable: true}},
				{"expandable-2streams", alt, memory.PoolConfig{Expandable: true}},
			} {
				h := hashReplay(t, c.ops, slots, c.cfg)
				lines = append(lines, fmt.Sprintf("%s scale %g %s %016x", file, scale, c.name, h))
			}
		}
	}
	// The mixed workload with frees of random slots on three streams.
	rng := rand.New(rand.NewPCG(7, 11))
	var ops []poolOp
	lo, hi := math.Log(512), math.Log(64<<20)
	live := make([]bool, 300)
	for range 40000 {
		s := rng.IntN(len(live))
		if live[s] {
			ops = append(ops, poolOp{slot: s, free: true})
		}
		live[s] = true
		ops = append(ops, poolOp{slot: s, size: int64(math.Exp(lo + rng.Float64()*(hi-lo))), stream: memory.Stream(rng.IntN(3))})
	}
	for _, c := range []struct {
		name string
		cfg  memory.PoolConfig
	}{{"classic", memory.PoolConfig{}}, {"classic-maxsplit40M", memory.PoolConfig{MaxSplitSize: 40 << 20}}, {"expandable", memory.PoolConfig{Expandable: true}}} {
		h := hashReplay(t, ops, len(live), c.cfg)
		lines = append(lines, fmt.Sprintf("random %s %016x", c.name, h))
	}
	require.NoError(t, os.WriteFile(*traceHashes, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
}

// hashReplay replays ops on a fresh pool and hashes its decisions.
// Addresses are hashed as (segment, offset), segments numbered in the
// order they are first seen, so that the hash does not depend on where
// the backend maps them.
func hashReplay(t *testing.T, ops []poolOp, slots int, cfg memory.PoolConfig) uint64 {
	var b memory.Backend = memtest.NewAddressBackend(memory.TierDevice, 1<<44)
	if cfg.Expandable {
		b = memory.NewHostBackend(memory.TierDevice)
	}
	p := memory.NewPool(b, cfg)
	h := fnv.New64a()
	var buf [8]byte
	put := func(v int64) {
		for i := range buf {
			buf[i] = byte(v >> (8 * i))
		}
		h.Write(buf[:])
	}
	type seg struct {
		base uintptr
		size int64
		id   int
	}
	var segs []seg
	ids := map[uintptr]int{}
	locate := func(addr uintptr) (int, int64) {
		for pass := 0; pass < 2; pass++ {
			for _, s := range segs {
				if addr >= s.base && int64(addr-s.base) < s.size {
					return s.id, int64(addr - s.base)
				}
			}
			segs = segs[:0]
			for _, si := range p.Segments() {
				id, ok := ids[si.Addr]
				if !ok {
					id = len(ids)
					ids[si.Addr] = id
				}
				segs = append(segs, seg{si.Addr, si.Size, id})
			}
		}
		t.Fatalf("address %#x in no segment", addr)
		return 0, 0
	}
	blocks := make([]*memory.Block, slots)
	for i, op := range ops {
		if op.free {
			require.NoError(t, p.Free(blocks[op.slot]))
			blocks[op.slot] = nil
		} else {
			blk, err := p.Alloc(op.size, op.stream)
			require.NoError(t, err)
			blocks[op.slot] = blk
			id, off := locate(blk.Addr())
			put(int64(id))
			put(off)
		}
		st := p.Stats()
		put(st.Reserved.Current)
		put(st.InactiveSplit.Current)
		put(st.Allocated.Current)
		put(st.Active.Current)
		if i%500 == 0 {
			for _, si := range p.Segments() {
				id, _ := locate(si.Addr)
				put(int64(id))
				put(si.Size)
				put(si.Mapped)
				for _, bi := range si.Blocks {
					put(int64(bi.Addr - si.Addr))
					put(bi.Size)
					put(bi.Requested)
					var f int64
					if bi.Live {
						f |= 1
					}
					if bi.Unmapped {
						f |= 2
					}
					put(f)
				}
			}
		}
	}
	st := p.Stats()
	put(st.Reserved.Peak)
	put(st.BackendAllocs)
	put(st.BackendFrees)
	for _, blk := range blocks {
		if blk != nil {
			require.NoError(t, p.Free(blk))
		}
	}
	require.NoError(t, p.Close())
	return h.Sum64()
}
