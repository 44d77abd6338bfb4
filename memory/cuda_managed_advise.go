package memory

import (
	"fmt"
	"os"

	"github.com/strata-ml/strata/cuda"
)

// hostPageSize is the granularity of managed-memory advice: the driver
// rounds every advised range out to whole host pages.
var hostPageSize = uintptr(os.Getpagesize())

// Advise applies advice to the bytes [off, off+size) of managed region r,
// as the Adviser interface describes: each flag of clear is unset on the
// pages wholly inside the range, then each flag of set is set on the pages
// it touches (one cuMemAdvise per flag), and AdvisePrefetchToDevice
// migrates those pages to the device with cuMemPrefetchAsync on stream s.
// Stream 0 is the legacy default stream; other streams must be known to
// the CUDA manager's CUDAStreams.
func (m *managedBackend) Advise(r Region, off, size int64, set, clear Advice, s Stream) error {
	if !m.live.has(r) {
		return fmt.Errorf("memory: %s: advice for a region that is not live (addr %#x, %d bytes): %w", m.name, r.Addr, r.Size, ErrInvalidArgument)
	}
	if off < 0 || size <= 0 || off > r.Size-size {
		return fmt.Errorf("memory: %s: advice for bytes [%d, %d) of a %d-byte region: %w", m.name, off, off+size, r.Size, ErrInvalidArgument)
	}
	for _, a := range [2]Advice{set, clear} {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("memory: %s: %w", m.name, err)
		}
	}
	start := r.Addr + uintptr(off)
	if clear != 0 {
		lo := (start + hostPageSize - 1) &^ (hostPageSize - 1)
		hi := (start + uintptr(size)) &^ (hostPageSize - 1)
		if hi > lo {
			if err := m.apply(cuda.DevicePtr(lo), int(hi-lo), clear, true); err != nil {
				return err
			}
		}
	}
	if err := m.apply(cuda.DevicePtr(start), int(size), set, false); err != nil {
		return err
	}
	if set&AdvisePrefetchToDevice == 0 {
		return nil
	}
	st, err := m.stream(s)
	if err != nil {
		return err
	}
	if err := m.ctx.MemPrefetchAsync(cuda.DevicePtr(start), int(size), cuda.DeviceLocation(m.ctx.Device()), st); err != nil {
		return fmt.Errorf("memory: %s: prefetching %s at %#x to the device: %w", m.name, FormatBytes(size), start, err)
	}
	return nil
}

// apply sets (or, with unset, unsets) each advice flag of a on [p, p+n).
func (m *managedBackend) apply(p cuda.DevicePtr, n int, a Advice, unset bool) error {
	dev, host := cuda.DeviceLocation(m.ctx.Device()), cuda.HostLocation()
	for _, c := range [...]struct {
		flag       Advice
		set, unset cuda.Advice
		loc        cuda.Location
	}{
		{AdviseReadMostly, cuda.AdviseSetReadMostly, cuda.AdviseUnsetReadMostly, dev},
		{AdvisePreferDevice, cuda.AdviseSetPreferredLocation, cuda.AdviseUnsetPreferredLocation, dev},
		{AdvisePreferHost, cuda.AdviseSetPreferredLocation, cuda.AdviseUnsetPreferredLocation, host},
		{AdviseAccessedByDevice, cuda.AdviseSetAccessedBy, cuda.AdviseUnsetAccessedBy, dev},
		{AdviseAccessedByHost, cuda.AdviseSetAccessedBy, cuda.AdviseUnsetAccessedBy, host},
	} {
		if a&c.flag == 0 {
			continue
		}
		adv := c.set
		if unset {
			adv = c.unset
		}
		if err := m.ctx.MemAdvise(p, n, adv, c.loc); err != nil {
			return fmt.Errorf("memory: %s: %s (%s) on %s at %s: %w", m.name, adv, c.flag, FormatBytes(int64(n)), p, err)
		}
	}
	return nil
}

// stream resolves a pool Stream for an ordered call.
func (m *managedBackend) stream(s Stream) (*cuda.Stream, error) {
	if s == 0 {
		return nil, nil
	}
	if m.streams == nil {
		return nil, fmt.Errorf("memory: %s: stream %#x is unknown: only the default stream can be used without a CUDA manager's CUDAStreams: %w",
			m.name, uintptr(s), ErrInvalidArgument)
	}
	return m.streams.CUDA(s)
}
