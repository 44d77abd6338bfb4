package memory

import "unsafe"

// pinnedCopier copies between page-locked host memory (the staging tier,
// and the offload tier when it is pinned memory: NewPinnedOffloadBackend)
// and device memory with the host pointer: cuMemcpyHtoDAsync and
// cuMemcpyDtoHAsync. A device-to-device copy through the host memory's
// device alias is what unified addressing allows, and it works into
// memory from cuMemAlloc; into expandable segments (pages mapped with the
// virtual memory API) the H200's driver 580 refused one with
// CUDA_ERROR_INVALID_VALUE (session 17), where copies from page-locked
// memory by its host pointer, the driver's own pinned path, never failed
// (cuda's TestGPUVMMCopies).
type pinnedCopier struct {
	// pinned marks the tiers over page-locked host memory.
	pinned   [NumTiers]bool
	toDevice func(dst uintptr, src unsafe.Pointer, n int64, s Stream) error
	toHost   func(dst unsafe.Pointer, src uintptr, n int64, s Stream) error
}

// locked reports whether tier t is page-locked host memory.
func (p *pinnedCopier) locked(t Tier) bool { return t < NumTiers && p.pinned[t] }

// copyBetween copies n bytes from block src, in tier st, to block dst, in
// tier dt, ordered on stream s: by the host pointer between a page-locked
// host tier and the device tier when the manager has a pinnedCopier, else
// with the CopyFunc, else through the host views.
func (m *Manager) copyBetween(dst, src *Block, dt, st Tier, n int64, s Stream) error {
	if p := m.pinned; p != nil && n > 0 {
		switch {
		case dt == TierDevice && p.locked(st) && src.Host() != nil:
			return p.toDevice(dst.Addr(), unsafe.Pointer(unsafe.SliceData(src.Host())), n, s)
		case st == TierDevice && p.locked(dt) && dst.Host() != nil:
			return p.toHost(unsafe.Pointer(unsafe.SliceData(dst.Host())), src.Addr(), n, s)
		}
	}
	if m.copyFn != nil {
		return m.copyFn(dst.Addr(), src.Addr(), n, s)
	}
	return m.copyBytes(dst, src, n)
}
