package memory

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// SetLimit caps the bytes tier t's pool may reserve from its backend (0:
// no cap): the device budget of the hybrid placement, enforced by the
// pool before the backend is asked. The device tier's limit also counts
// the managed tier's reserved bytes (unified memory's pages live on the
// device that touches them): a device allocation is refused (or spills,
// under a spilling policy) when device and managed memory together would
// exceed it. A managed allocation is not refused by it (only by the
// managed backend's own rule against oversubscribing the device): past
// the budget it leaves the device pool that much less room, and a
// Scheduler, which counts managed bytes in its demand, demotes colder
// tensors to bring the total back under it (as far as tensors below its
// HotTouches are there to demote). SetLimit(TierManaged, n) caps the
// managed tier itself.
// Lowering it below what the pool holds releases the pool's cached
// segments (and the managed tier's, when the device limit still has no
// room); live memory stays, and later allocations fail (or spill, under
// a spilling policy) until enough is freed.
func (m *Manager) SetLimit(t Tier, limit int64) error {
	if t >= NumTiers {
		return fmt.Errorf("memory: SetLimit on unknown %s: %w", t, ErrInvalidArgument)
	}
	if limit < 0 {
		return fmt.Errorf("memory: limit %d for tier %s is negative: %w", limit, t, ErrInvalidArgument)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("memory: manager: SetLimit after close: %w", ErrClosed)
	}
	p := m.pools[t]
	if p == nil {
		return fmt.Errorf("memory: SetLimit: tier %s has no backend: %w", t, ErrInvalidArgument)
	}
	p.cfg.Limit = limit
	if limit > 0 && p.held() > limit {
		return p.emptyLimitCache(0)
	}
	return nil
}

// emptyLimitCache empties the cache of p and then, while its limit still
// has less than room bytes free, the cache of the pools that share the
// limit (releaseShared); with the manager's lock held.
func (p *Pool) emptyLimitCache(room int64) error {
	err := p.emptyCache()
	if room > p.cfg.Limit-p.held() {
		_, serr := p.releaseSharedCache(true)
		err = errors.Join(err, serr)
	}
	return err
}

// Hold counts n bytes that the caller holds outside the pools (memory it
// allocated from the driver itself, such as a ring of copy buffers that
// the copy engines must reach, which ranges mapped with the virtual memory
// API do not always let them) against tier t's limit, so that a device
// budget covers all the device memory the process uses: the pool then
// holds n bytes less, and the placement scheduler sees them in its demand.
// It fails, wrapping ErrOutOfMemory, when the limit has no room for them
// even after the pool's cached segments are released, and those of the
// pools the limit also covers (the device limit's managed tier). Bytes
// held past the largest request (4 EiB in all) are refused with
// ErrInvalidArgument where there is no limit; under a limit they are past
// it, and refused as any hold the limit has no room for (ErrOutOfMemory).
// release gives the bytes back (once; later calls do nothing).
func (m *Manager) Hold(t Tier, n int64) (release func(), err error) {
	if t >= NumTiers || n <= 0 {
		return nil, fmt.Errorf("memory: Hold of %d bytes on %s: want a known tier and a positive size: %w", n, t, ErrInvalidArgument)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("memory: manager: Hold after close: %w", ErrClosed)
	}
	p := m.pools[t]
	if p == nil {
		return nil, fmt.Errorf("memory: Hold: tier %s has no backend: %w", t, ErrInvalidArgument)
	}
	if lim := p.cfg.Limit; lim > 0 && n > lim-p.held() { // not held+n: n may be near MaxInt64
		if err := p.emptyLimitCache(n); err != nil {
			return nil, fmt.Errorf("memory: Hold of %s on %s: releasing the cache for room: %w", FormatBytes(n), t, err)
		}
		if n > lim-p.held() {
			return nil, fmt.Errorf("memory: Hold of %s on %s: %s of its %s limit is held: %w", FormatBytes(n), t, FormatBytes(p.held()), FormatBytes(lim), ErrOutOfMemory)
		}
	}
	if n > maxRequest-p.external { // without a limit: held must not overflow
		return nil, fmt.Errorf("memory: Hold of %s on %s (%s held already): past the largest size, %s: %w",
			FormatBytes(n), t, FormatBytes(p.external), FormatBytes(maxRequest), ErrInvalidArgument)
	}
	p.external += n
	if m.sched != nil && t == TierDevice {
		m.sched.onGrow() // the held bytes are part of the device's demand
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			p.external -= n
			m.mu.Unlock()
		})
	}, nil
}

// Limit returns tier t's cap on reserved bytes (0: none, or no backend).
func (m *Manager) Limit(t Tier) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t >= NumTiers || m.pools[t] == nil {
		return 0
	}
	return m.pools[t].cfg.Limit
}

// ParseBudget reads a memory budget: a byte count with an optional unit
// ("4GiB", "500MB", "1073741824"; K, M, G, T are binary), or a share of
// whole ("50%", or a fraction such as "0.5"); "off", "none" or "0" is no
// budget (0). A number of 1 or more written with a decimal point and no
// unit ("1.0", "1.5", or "0.99999999999999999", which a float64 rounds to
// 1) is neither a share nor plainly a byte count ("1.0" meant all of it
// as often as one byte), and a share that comes to less than a byte of
// whole would be no budget at all: both are refused. Errors name the
// accepted forms.
func ParseBudget(s string, whole int64) (int64, error) {
	const forms = "want a size such as 4GiB or 500MB, a share such as 50% or 0.5, or off"
	f, point := pointNumber(s)
	if point && f >= 1 {
		return 0, fmt.Errorf("memory: budget %q: a number with a point and no unit is a share below 1 (0.5); write 100%% for all of it, or a byte count without a point or with a unit (%s): %w", s, forms, ErrInvalidArgument)
	}
	if point && f > 0 { // a share
		if whole <= 0 {
			return 0, fmt.Errorf("memory: budget %q is a share, but the memory it is a share of is unknown: %w", s, ErrInvalidArgument)
		}
		n := int64(float64(whole) * f)
		if n < 1 {
			return 0, fmt.Errorf("memory: budget %q: a share of %s that is less than a byte (%s): %w", s, FormatBytes(whole), forms, ErrInvalidArgument)
		}
		return n, nil
	}
	n, err := ParseHostMemory(s, whole)
	switch {
	case errors.Is(err, errSizeForm): // its forms are ours, but for the fraction
		return 0, fmt.Errorf("memory: budget %q: %s: %w", s, forms, ErrInvalidArgument)
	case err != nil:
		return 0, fmt.Errorf("memory: budget %q: %v (%s): %w", s, err, forms, ErrInvalidArgument)
	}
	return n, nil
}

// pointNumber reads a number written with a decimal point and no unit.
func pointNumber(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && strings.Contains(s, ".")
}
