package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These run everywhere: the rules of the CUDA managed backend that need no
// driver. The GPU tests (cuda_*_test.go) check the rest on a device.

func TestManagedHeadroom(t *testing.T) {
	const MiB, GiB = int64(1) << 20, int64(1) << 30
	assert.Equal(t, 512*MiB, ManagedHeadroom(16*GiB), "small devices keep 512 MiB")
	assert.Equal(t, 2*GiB+32*MiB, ManagedHeadroom(130*GiB), "large devices keep 1/64")
}

func TestManagedFits(t *testing.T) {
	const GiB = int64(1) << 30
	total := 80 * GiB
	room := ManagedHeadroom(total) // 1.25 GiB
	for _, c := range []struct {
		name             string
		size, live, free int64
		fits             bool
		mentions         string
	}{
		{"small request on an idle device", GiB, 0, 79 * GiB, true, ""},
		{"up to free less the headroom", 10*GiB - room, 0, 10 * GiB, true, ""},
		{"one byte more", 10*GiB - room + 1, 0, 10 * GiB, false, "headroom"},
		{"the whole free memory", 10 * GiB, 0, 10 * GiB, false, "10.00 GiB free"},
		{"cumulative: live plus request within total less headroom", 40 * GiB, 38 * GiB, 79 * GiB, true, ""},
		{"cumulative: beyond total less headroom", 40 * GiB, 39 * GiB, 79 * GiB, false, "already out"},
	} {
		err := managedFits(c.size, c.live, c.free, total)
		if c.fits {
			assert.NoError(t, err, c.name)
			continue
		}
		require.ErrorIs(t, err, ErrOutOfMemory, c.name)
		assert.Contains(t, err.Error(), c.mentions, c.name)
	}
}

func TestManagedAdviseValidates(t *testing.T) {
	m := &managedBackend{name: "test managed"}
	r := Region{Addr: 1 << 40, Size: 1 << 20}
	err := m.Advise(r, 0, 512, AdviseReadMostly, 0, 0)
	require.ErrorIs(t, err, ErrInvalidArgument, "a region that is not live")
	m.live.add(r.Addr, r.Size, nil)
	for _, c := range []struct{ off, size int64 }{{-1, 512}, {0, 0}, {0, -5}, {1<<20 - 511, 512}, {1 << 20, 1}} {
		err := m.Advise(r, c.off, c.size, AdviseReadMostly, 0, 0)
		require.ErrorIs(t, err, ErrInvalidArgument, "bytes [%d, %d)", c.off, c.off+c.size)
	}
	err = m.Advise(r, 0, 512, AdvisePreferDevice|AdvisePreferHost, 0, 0)
	require.ErrorIs(t, err, ErrInvalidArgument, "contradictory advice")
	_, err = m.stream(7)
	require.ErrorIs(t, err, ErrInvalidArgument, "a stream no CUDAStreams knows")
	st, err := m.stream(0)
	require.NoError(t, err)
	assert.Nil(t, st, "stream 0 is the default stream")
}

func TestLiveRegions(t *testing.T) {
	var l liveRegions
	l.add(4096, 100, nil)
	l.add(8192, 200, nil)
	assert.Equal(t, int64(300), l.total())
	assert.True(t, l.has(Region{Addr: 4096, Size: 100}))
	assert.False(t, l.has(Region{Addr: 4096, Size: 99}))
	_, err := l.remove("x", Region{Addr: 4096, Size: 99})
	require.ErrorIs(t, err, ErrDoubleFree, "wrong size")
	_, err = l.remove("x", Region{Addr: 4096, Size: 100})
	require.NoError(t, err)
	_, err = l.remove("x", Region{Addr: 4096, Size: 100})
	require.ErrorIs(t, err, ErrDoubleFree)
	assert.Equal(t, int64(200), l.total())
}
