package memory

import "unsafe"

// pinnedCopier copies between page-locked host memory (the staging tier)
// and device memory with the host pointer: cuMemcpyHtoDAsync and
// cuMemcpyDtoHAsync. A device-to-device copy through the host memory's
// device alias is what unified addressing allows, and it works into
// memory from cuMemAlloc; into expandable segments (pages mapped with the
// virtual memory API) the H200's driver 580 refused one with
// CUDA_ERROR_INVALID_VALUE (session 17), where copies from page-locked
// memory by its host pointer, the driver's own pinned path, never failed
// (cuda's TestGPUVMMCopies).
type pinnedCopier struct {
	toDevice func(dst uintptr, src unsafe.Pointer, n int64, s Stream) error
	toHost   func(dst unsafe.Pointer, src uintptr, n int64, s Stream) error
}

// copyBetween copies n bytes from block src, in tier st, to block dst, in
// tier dt, ordered on stream s: by the host pointer between the staging
// and the device tiers when the manager has a pinnedCopier, else with the
// CopyFunc, else through the host views.
func (m *Manager) copyBetween(dst, src *Block, dt, st Tier, n int64, s Stream) error {
	if p := m.pinned; p != nil && n > 0 {
		switch {
		case st == TierStaging && dt == TierDevice && src.Host() != nil:
			return p.toDevice(dst.Addr(), unsafe.Pointer(unsafe.SliceData(src.Host())), n, s)
		case dt == TierStaging && st == TierDevice && dst.Host() != nil:
			return p.toHost(unsafe.Pointer(unsafe.SliceData(dst.Host())), src.Addr(), n, s)
		}
	}
	if m.copyFn != nil {
		return m.copyFn(dst.Addr(), src.Addr(), n, s)
	}
	return m.copyBytes(dst, src, n)
}
