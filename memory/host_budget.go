package memory

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"sync"
)

// HostBudget caps the bytes that several backends hold from the
// operating system together: the CPU device's manager has a host backend
// per tier, and all of them draw on the same RAM. Without it an oversized
// job on the CPU maps more than the machine has and the kernel kills the
// process (exit 137, no message); with it the allocation that would pass
// the budget fails with ErrOutOfMemory, which the pool turns into an
// *OOMError after releasing its cache (and, in a manager, the cache of
// its other pools charged to the same budget: bytes another tier merely
// caches are no shortage), and the program can report it. A
// budget is safe for concurrent use. A nil *HostBudget is no budget
// (DefaultHostBudget's for "off"): its limit and use are 0.
//
// A region or page whose free fails stays charged: the memory may still
// be held (a failed munmap leaves the pages mapped), and counting it as
// given back could let the pools map past the budget. The pool that freed
// it drops it all the same, so no one will free it again: its bytes are
// lost (Lost), and what the budget holds is its pools' reserved bytes
// plus the lost ones. A free the backend refuses as not its own
// (ErrDoubleFree) changes nothing.
type HostBudget struct {
	mu         sync.Mutex
	limit      int64
	used, peak int64
	lost       int64  // charged bytes whose free failed (Lost)
	source     string // how the limit was chosen, for messages
}

// NewHostBudget returns a budget of limit bytes; source says where the
// number came from ("STRATA_HOST_MEMORY=8GiB", ...) for messages. A limit
// of 0 is no budget (nil), as ParseHostMemory reads "off" and Limit
// reports nil, so that ParseHostMemory's result can be passed here; a
// budget of 0 bytes would refuse every allocation. A negative limit is a
// programming error: it panics with an error wrapping ErrInvalidArgument.
func NewHostBudget(limit int64, source string) *HostBudget {
	switch {
	case limit < 0:
		panic(fmt.Errorf("memory: NewHostBudget: negative limit %d bytes (%s): %w", limit, source, ErrInvalidArgument))
	case limit == 0:
		return nil
	}
	return &HostBudget{limit: limit, source: source}
}

// Limit is the budget in bytes (0 for nil: no budget).
func (b *HostBudget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used returns the bytes charged now and at most so far (0 for nil).
func (b *HostBudget) Used() (current, peak int64) {
	if b == nil {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// Lost returns the bytes still charged for regions and pages whose free
// failed (0 for nil): no pool holds them, and they are never released.
func (b *HostBudget) Lost() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lost
}

func (b *HostBudget) String() string {
	if b == nil {
		return "no host memory budget"
	}
	return fmt.Sprintf("host memory budget of %s (%s)", FormatBytes(b.limit), b.source)
}

// charge takes n bytes for backend name, or fails with ErrOutOfMemory.
func (b *HostBudget) charge(name string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.refuse(name, n); err != nil {
		return err
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return nil
}

// check is charge's refusal of n bytes without the charge: an expandable
// pool asks it before it moves any page for growth that needs n bytes of
// new pages (Pool.checkRoom).
func (b *HostBudget) check(name string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refuse(name, n)
}

// refuse is the error of n bytes that would pass the budget, nil when
// they fit; with b.mu held.
func (b *HostBudget) refuse(name string, n int64) error {
	if n > b.limit-b.used {
		lost := ""
		if b.lost > 0 {
			lost = fmt.Sprintf(" (%s of it lost to frees that failed)", FormatBytes(b.lost))
		}
		return fmt.Errorf("memory: %s: allocating %s would pass the %s: %s held by the CPU device's pools%s: %w",
			name, FormatBytes(n), b, FormatBytes(b.used), lost, ErrOutOfMemory)
	}
	return nil
}

func (b *HostBudget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// resize turns a charge of from bytes into one of to bytes, past the
// limit if need be (the bytes are held already).
func (b *HostBudget) resize(from, to int64) {
	b.mu.Lock()
	b.used += to - from
	b.peak = max(b.peak, b.used)
	b.mu.Unlock()
}

// freed settles the charge of n bytes whose free returned err: released
// when it succeeded, lost when it failed (the memory may still be held,
// and its pool drops it), unchanged when the backend refused it as not
// its own (ErrDoubleFree: its charge, if any, is another's).
func (b *HostBudget) freed(n int64, err error) {
	switch {
	case err == nil:
		b.release(n)
	case !errors.Is(err, ErrDoubleFree):
		b.mu.Lock()
		b.lost += n
		b.mu.Unlock()
	}
}

// NewBudgetHostManager is NewHostManager with every tier's host backend
// charged to one budget b (nil: no budget). It panics if cfg is invalid.
func NewBudgetHostManager(cfg Config, b *HostBudget) *Manager {
	if b == nil {
		return NewHostManager(cfg)
	}
	backends := make([]Backend, NumTiers)
	for t := range NumTiers {
		backends[t] = NewBudgetBackend(NewHostBackend(t), b)
	}
	m, err := NewManager(backends, cfg)
	if err != nil {
		panic(err)
	}
	return m
}

// EnvHostMemory is the environment variable that sets the CPU device's
// host memory budget: a size ("12GiB", "500MB", "1073741824"), a share of
// the memory this process may use ("50%"), or "off".
const EnvHostMemory = "STRATA_HOST_MEMORY"

// MinHostBudget is the smallest budget EnvHostMemory accepts: a page of
// the host backend's virtual memory (HostPageSize) and the smallest
// segment of a classic pool (SmallBuffer), less than which no allocation
// can be served.
const MinHostBudget = 2 << 20

// DefaultHostShare is the share of the memory this process may use that
// the default budget allows: the rest is for the Go heap, BLAS buffers,
// the program's own data and the page cache.
const DefaultHostShare = 0.75

// DefaultHostBudget is the CPU device's budget: as EnvHostMemory says, or
// DefaultHostShare of the memory this process may use, the smaller of the
// machine's RAM and its cgroup's memory limit (cgroup v2 memory.max or v1
// memory.limit_in_bytes, of its cgroup and every ancestor), and at most
// 9/10 of the memory available when it is asked. It returns nil (no
// budget) for "off" or when neither the RAM nor a limit can be read, and
// an error for a malformed EnvHostMemory or one below MinHostBudget, with
// the default budget.
func DefaultHostBudget() (*HostBudget, error) {
	limit, what := hostMemoryLimit()
	avail, _, okAvail := hostMemInfo()
	if v := strings.TrimSpace(os.Getenv(EnvHostMemory)); v != "" {
		n, err := ParseHostMemory(v, limit)
		if err == nil && n > 0 && n < MinHostBudget {
			err = fmt.Errorf("a budget of %s is less than the smallest accepted, %s (a page of host memory, which every allocation needs at least)",
				FormatBytes(n), FormatBytes(MinHostBudget))
		}
		if err == nil {
			if n == 0 {
				return nil, nil
			}
			return NewHostBudget(n, EnvHostMemory+"="+v), nil
		}
		b, _ := defaultBudget(limit, what, avail, okAvail)
		return b, fmt.Errorf("memory: %s=%q: %w; using the default %v", EnvHostMemory, v, err, b)
	}
	return defaultBudget(limit, what, avail, okAvail)
}

func defaultBudget(limit int64, what string, avail int64, okAvail bool) (*HostBudget, error) {
	if limit <= 0 {
		return nil, nil
	}
	n := int64(float64(limit) * DefaultHostShare)
	src := fmt.Sprintf("%.0f%% of the %s %s; %s changes it", 100*DefaultHostShare, FormatBytes(limit), what, EnvHostMemory)
	if okAvail && avail > 0 && avail/10*9 < n {
		n = avail / 10 * 9
		src = fmt.Sprintf("90%% of the %s available at start (of %s %s); %s changes it", FormatBytes(avail), FormatBytes(limit), what, EnvHostMemory)
	}
	return NewHostBudget(n, src), nil
}

// errSizeForm is ParseHostMemory's error for a value of no form it
// reads; ParseBudget, which reads more forms, says its own instead.
var errSizeForm = errors.New("want a size such as 8GiB, 500MB or 1073741824, a share such as 50%, or off")

// ParseHostMemory reads an EnvHostMemory value: "off", "none" or "0" (no
// budget: 0), a percentage of limit ("50%"), or a byte count with an
// optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; K, M, G, T are
// binary). A byte count without a unit (or in B) must be whole: "1.5"
// is refused, not read as 1 byte. Whole counts are read exactly; one past
// 4 EiB (1<<62) is refused, as is an unknown unit, and the error says so.
func ParseHostMemory(s string, limit int64) (int64, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "off", "none", "0":
		return 0, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		switch {
		case err != nil || !(f > 0 && f <= 100):
			return 0, fmt.Errorf("a percentage must be in (0, 100]")
		case limit <= 0:
			return 0, fmt.Errorf("a percentage needs the machine's memory, which cannot be read here")
		}
		n := limit // 100%, exactly (a float64 of a large limit rounds past it)
		if x := float64(limit) * f / 100; x < float64(limit) {
			n = int64(x)
		}
		if n < 1 {
			return 0, fmt.Errorf("%g%% of %s is less than a byte", f, FormatBytes(limit))
		}
		return n, nil
	}
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') && s[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(s[:i]), strings.ToLower(strings.TrimSpace(s[i:]))
	mult := map[string]float64{"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}[unit]
	if mult == 0 && num != "" {
		return 0, fmt.Errorf("%q is no unit of memory (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; K, M, G, T)", strings.TrimSpace(s[i:]))
	}
	f, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil && !errors.Is(err, strconv.ErrRange) || !(f*mult >= 1) {
		return 0, errSizeForm
	}
	tooLarge := func() error { return fmt.Errorf("%s is more than the largest size, %s", s, FormatBytes(maxSize)) }
	if f*mult > maxSize {
		return 0, tooLarge()
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil { // exactly, where a float64 is not
		if n > maxSize/int64(mult) {
			return 0, tooLarge()
		}
		return n * int64(mult), nil
	}
	// Whole or not, read exactly: a float64 loses the fraction of a large
	// count ("4611686018427387903.9" was taken as 2^62), and rounds a
	// whole one past 2^53 ("4611686018427387905.0", past the largest
	// size, was taken as 2^62).
	r, exact := new(big.Rat).SetString(num)
	if mult == 1 && (f != math.Trunc(f) || exact && !r.IsInt()) {
		return 0, fmt.Errorf("%s is not a whole number of bytes (a share is written 0.5 or 50%%, a size with a unit as 1.5GiB)", num)
	}
	if exact && r.IsInt() {
		n := new(big.Int).Mul(r.Num(), big.NewInt(int64(mult)))
		if n.Cmp(big.NewInt(maxSize)) > 0 {
			return 0, tooLarge()
		}
		return n.Int64(), nil
	}
	return int64(f * mult), nil
}

// maxSize is the largest byte count ParseHostMemory reads.
const maxSize = 1 << 62

// HostAvailable returns the host memory a new allocation can get now
// without swapping: Linux's MemAvailable, and no more than the limit of
// the process's cgroup (or the RAM) where that is smaller. ok is false
// where neither can be read (outside Linux). Readers that must hold a
// whole file in memory check its size against it first: Go cannot turn a
// failed allocation of a large slice into an error.
func HostAvailable() (n int64, ok bool) {
	avail, _, okAvail := hostMemInfo()
	limit, _ := hostMemoryLimit()
	switch {
	case okAvail && limit > 0:
		return min(avail, limit), true
	case okAvail:
		return avail, true
	case limit > 0:
		return limit, true
	}
	return 0, false
}
