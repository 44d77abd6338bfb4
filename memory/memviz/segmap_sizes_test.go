package memviz_test

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strata-ml/strata/memory"
	"github.com/strata-ml/strata/memory/memviz"
)

// TestSegmentMapRefusesImpossibleSizes: a snapshot (made by hand, or read
// from a damaged file) whose block sizes are negative or sum past int64
// is an error naming the block. Two segments of 2^63-1 bytes wrapped the
// total to -2, and WriteSegmentMapPNG ran for ever drawing one of them a
// 2 MiB row at a time.
func TestSegmentMapRefusesImpossibleSizes(t *testing.T) {
	seg := func(addr uintptr, sizes ...int64) memory.SegmentInfo {
		s := memory.SegmentInfo{Addr: addr}
		for _, n := range sizes {
			s.Blocks = append(s.Blocks, memory.BlockInfo{Addr: addr + uintptr(s.Size), Size: n})
			s.Size += n
		}
		return s
	}
	for name, segs := range map[string][]memory.SegmentInfo{
		"0x10 has 9223372036854775807 bytes":   {seg(0x10, math.MaxInt64), seg(0x1000, math.MaxInt64)},
		"0x2000 has 4611686018427387904 bytes": {seg(0x1000, 1<<62), seg(0x2000, 1<<62)},
		"0x1000 has -4096 bytes":               {seg(0x1000, -4096, 8192)},
	} {
		s := memory.Snapshot{Tiers: []memory.TierSnapshot{{Tier: memory.TierDevice, Segments: segs}}}
		done := make(chan error, 1)
		go func() { done <- memviz.WriteSegmentMapPNG(&bytes.Buffer{}, s, memviz.PlotOptions{}) }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, memory.ErrInvalidArgument, name)
			assert.Contains(t, err.Error(), "memviz: WriteSegmentMapPNG: the block at "+name, name)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: WriteSegmentMapPNG still running after 20 s", name)
		}
	}
}
