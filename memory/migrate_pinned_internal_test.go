package memory

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// With a pinnedCopier, moves between the staging and the device tiers copy
// by the staging block's host pointer, on the move's stream, in the right
// direction; moves between other tiers keep the CopyFunc. (The fakes copy
// nothing: the byte-for-byte moves are MigrateOn's tests and, on the GPU,
// tensor's TestMoveTo.)
func TestCopyBetweenPinned(t *testing.T) {
	m := NewHostManager(Config{StreamSync: newLateSync()})
	type call struct {
		dir       string
		dev, host uintptr
		n         int64
		s         Stream
	}
	var calls []call
	var funcCopies int
	m.SetCopy(func(dst, src uintptr, n int64, s Stream) error {
		funcCopies++
		return nil
	})
	m.pinned = &pinnedCopier{
		toDevice: func(dst uintptr, src unsafe.Pointer, n int64, s Stream) error {
			calls = append(calls, call{"to device", dst, uintptr(src), n, s})
			return nil
		},
		toHost: func(dst unsafe.Pointer, src uintptr, n int64, s Stream) error {
			calls = append(calls, call{"to host", src, uintptr(dst), n, s})
			return nil
		},
	}
	const own, copier Stream = 1, 2
	a, err := m.AllocStream(3000, RoleActivation, own)
	require.NoError(t, err)
	dev := a.Addr()

	require.NoError(t, m.MigrateOn(a, TierStaging, copier))
	require.Len(t, calls, 1)
	require.Equal(t, call{"to host", dev, uintptr(unsafe.Pointer(unsafe.SliceData(a.Host()))), 3000, copier}, calls[0],
		"device to staging: the staging block's host pointer")
	staging := calls[0].host
	require.NoError(t, m.MigrateOn(a, TierDevice, copier))
	require.Len(t, calls, 2)
	require.Equal(t, call{"to device", a.Addr(), staging, 3000, copier}, calls[1], "and back from the same host pointer")
	require.NoError(t, m.MigrateOn(a, TierHost, copier))
	require.Len(t, calls, 2, "device to host memory is not the staging tier's")
	require.Equal(t, 1, funcCopies, "that one takes the CopyFunc")
	m.SetCopy(m.copyFn)
	require.Nil(t, m.pinned, "SetCopy takes every copy over")
	require.NoError(t, m.MigrateOn(a, TierStaging, copier))
	require.Equal(t, 2, funcCopies)
	require.Len(t, calls, 2)
	require.NoError(t, m.Free(a))
}
