package memory

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// With a pinnedCopier, moves between a page-locked host tier (the staging
// tier; the offload tier when it is pinned) and the device tier copy by
// the host block's pointer, on the move's stream, in the right direction;
// moves between other tiers (an offload tier over managed memory, host
// memory) keep the CopyFunc. (The fakes copy
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
		pinned: [NumTiers]bool{TierStaging: true},
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
	require.NoError(t, m.MigrateOn(a, TierDevice, copier))
	require.Equal(t, 2, funcCopies, "nor is it back")
	require.NoError(t, m.MigrateOn(a, TierOffload, copier))
	require.Equal(t, 3, funcCopies, "an offload tier over managed memory takes the CopyFunc")
	require.Len(t, calls, 2)
	require.NoError(t, m.MigrateOn(a, TierDevice, copier))
	require.Equal(t, 4, funcCopies)

	// The offload tier over pinned memory (the CUDA manager's default)
	// goes by its host pointer both ways.
	m.pinned.pinned[TierOffload] = true
	dev = a.Addr()
	require.NoError(t, m.MigrateOn(a, TierOffload, copier))
	require.Len(t, calls, 3)
	require.Equal(t, call{"to host", dev, uintptr(unsafe.Pointer(unsafe.SliceData(a.Host()))), 3000, copier}, calls[2],
		"device to pinned offload: the offload block's host pointer")
	offload := calls[2].host
	require.NoError(t, m.MigrateOn(a, TierDevice, copier))
	require.Len(t, calls, 4)
	require.Equal(t, call{"to device", a.Addr(), offload, 3000, copier}, calls[3], "and back from it")
	require.Equal(t, 4, funcCopies)
	m.SetCopy(m.copyFn)
	require.Nil(t, m.pinned, "SetCopy takes every copy over")
	require.NoError(t, m.MigrateOn(a, TierStaging, copier))
	require.Equal(t, 5, funcCopies)
	require.Len(t, calls, 4)
	require.NoError(t, m.Free(a))
}
