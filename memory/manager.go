package memory

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Config tunes a Manager.
type Config struct {
	// Policy places roles in tiers; the zero Policy means HybridPolicy().
	Policy Policy
	// Limits caps the bytes each tier's pool may reserve (0 = none). Limits
	// of tiers without a backend are ignored.
	Limits [NumTiers]int64
	// MaxSplitSize is every pool's PoolConfig.MaxSplitSize.
	MaxSplitSize int64
	// StreamSync is every pool's PoolConfig.StreamSync: what tells when
	// work on a stream has finished, for Manager.RecordStream. Nil on the
	// host; NewCUDAManager makes a CUDAStreams when it is nil.
	StreamSync StreamSync
	// Segments chooses classic or expandable segments for the pools whose
	// backend is a VirtualMemory (the CUDA device backend, host memory);
	// the others are always classic. See SegmentMode.
	Segments SegmentMode
	// PlanSteps chooses which expandable pools plan the training steps
	// (PoolConfig.PlanSteps; see PlanMode).
	PlanSteps PlanMode
}

// PlanMode chooses the expandable pools that plan the steps
// (Config.PlanSteps).
type PlanMode uint8

const (
	// PlanDefault plans the device tier's pool of a CUDA manager
	// (NewCUDAManager: the memory a GPU runs out of) unless the
	// environment variable STRATA_PLAN_STEPS is 0 or false; in other
	// managers (NewHostManager, NewManager) it plans none unless the
	// variable is 1 or true, then their device tier's. In live eager
	// training on an H100 plans took gpt2 fp16 with checkpointing from
	// 1.095 of the allocated peak reserved to 1.011 and gpt2 fp32 from
	// 1.033 to 1.0035 at the same speed, settling with no page mapped and
	// no synchronisation a step (bench/results/gpu-s37.md, call 2), and
	// every trace of bench/traces is within 1.02 of its requested peak
	// with them, where one is at 1.04 without. Their layouts' work is
	// bounded (pool_expand_plan.go, "Bounds"): goroutines interleaving
	// their allocations in one manager, whose periods never repeat, cost
	// a burst of layouts and then little per allocation. Recording the
	// allocations costs the device tier's alloc/free pair 31-115 ns on
	// fixed sizes, about 270 on random ones (PlanNone for a workload of
	// the latter whose allocation calls matter more than its memory).
	// Host memory is not planned by default: a small model trained on the
	// CPU (train-gpt's tiny config, a 28 MiB peak in 2 MiB pages)
	// reserved 36 MiB with plans against 30 without, from the first
	// step's small blocks placed after the highest live one (takeTop).
	PlanDefault PlanMode = iota
	// PlanNone plans no pool, whatever the environment says.
	PlanNone
	// PlanDevice plans the device tier's pool.
	PlanDevice
	// PlanAll plans every expandable pool of the manager.
	PlanAll
	// planCUDADefault is PlanDefault as NewCUDAManager resolves it.
	planCUDADefault
)

// EnvPlanSteps is the environment variable PlanDefault reads.
const EnvPlanSteps = "STRATA_PLAN_STEPS"

// planned resolves the mode for tier t's pool: whether it plans.
func (m PlanMode) planned(t Tier) (bool, error) {
	switch m {
	case PlanNone:
		return false, nil
	case PlanDevice:
		return t == TierDevice, nil
	case PlanAll:
		return true, nil
	case PlanDefault:
		on, err := envSwitch(EnvPlanSteps, false)
		return on && t == TierDevice, err
	case planCUDADefault:
		on, err := envSwitch(EnvPlanSteps, true)
		return on && t == TierDevice, err
	}
	return false, fmt.Errorf("memory: unknown plan mode %d: %w", m, ErrInvalidArgument)
}

// SegmentMode chooses how pools grow (Config.Segments).
type SegmentMode uint8

const (
	// SegmentsDefault is SegmentsExpandable, unless the environment
	// variable STRATA_EXPANDABLE_SEGMENTS says otherwise (0 or false:
	// classic; 1 or true: expandable).
	SegmentsDefault SegmentMode = iota
	// SegmentsClassic reserves a segment per cache miss, with PyTorch's
	// sizes (2 MiB, 20 MiB, or the request rounded to 2 MiB).
	SegmentsClassic
	// SegmentsExpandable grows one expandable segment per stream by
	// mapping pages (pool_expand.go): on PyTorch's traces it reserves
	// 1.5% or less above the requested peak where classic segments
	// reserve 11% and 34% more.
	SegmentsExpandable
)

// EnvExpandableSegments is the environment variable SegmentsDefault reads.
const EnvExpandableSegments = "STRATA_EXPANDABLE_SEGMENTS"

// expandable resolves the mode: whether pools over virtual memory use
// expandable segments.
func (m SegmentMode) expandable() (bool, error) {
	switch m {
	case SegmentsClassic:
		return false, nil
	case SegmentsExpandable:
		return true, nil
	case SegmentsDefault:
		return envSwitch(EnvExpandableSegments, true)
	}
	return false, fmt.Errorf("memory: unknown segment mode %d: %w", m, ErrInvalidArgument)
}

// envSwitch reads the environment variable name as a switch (1, true,
// yes, on; 0, false, no, off; any case), def when it is unset or empty;
// another value is an error naming it.
func envSwitch(name string, def bool) (bool, error) {
	switch v := os.Getenv(name); strings.ToLower(v) {
	case "":
		return def, nil
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	default:
		return false, fmt.Errorf("memory: %s=%q: want 1/true or 0/false: %w", name, v, ErrInvalidArgument)
	}
}

// envOn reads the switch name (envSwitch's forms) as on or off; a value
// it cannot read is off here, and an error of Config.Validate.
func envOn(name string) bool {
	on, err := envSwitch(name, false)
	return on && err == nil
}

// Validate reports a configuration NewManager would refuse.
func (c Config) Validate() error {
	if err := (PoolConfig{MaxSplitSize: c.MaxSplitSize}).Validate(); err != nil {
		return err
	}
	if _, err := c.Segments.expandable(); err != nil {
		return err
	}
	if _, err := c.PlanSteps.planned(TierDevice); err != nil {
		return err
	}
	// The diagnostics' switches, read once when the package starts
	// (envOn): a value they cannot read would leave them off unsaid.
	for _, name := range []string{EnvPoison, EnvMemoryCheck} {
		if _, err := envSwitch(name, false); err != nil {
			return err
		}
	}
	for t, l := range c.Limits {
		if l < 0 {
			return fmt.Errorf("memory: limit %d for tier %s is negative: %w", l, Tier(t), ErrInvalidArgument)
		}
	}
	return c.Policy.Validate()
}

// noTier marks a role whose placement and fallbacks all lack a backend.
const noTier = NumTiers

// fallback is the tier tried when a tier has no backend: managed memory
// degrades to device memory, device and staging memory to host memory,
// offload memory to staging memory (also host-resident and read by the
// device over the bus).
var fallback = [NumTiers]Tier{TierHost: noTier, TierDevice: TierHost, TierManaged: TierDevice, TierStaging: TierHost, TierOffload: TierStaging}

// Manager is the hybrid memory manager: one Pool per tier that has a
// backend, a Policy that places each allocation's Role in a tier, and
// statistics per tier, per role and in total. It is safe for concurrent
// use; one mutex guards it and its pools (mutex.go).
type Manager struct {
	mu     mutex
	pools  [NumTiers]*Pool
	policy Policy
	route  [NumRoles]Tier // tier each role allocates from, after fallback
	roles  [NumRoles]RoleUsage
	total  liveUsage // the pools' parent (usageSinks)
	live   int       // live allocations
	closed bool
	sync   StreamSync
	owned  []func() error // resources made for the manager, released by Close
	slab   []Allocation   // not yet handed out (allocation.go)
	// labeled holds the live allocations with a label (SetLabel), by
	// their block, for snapshots and leak reports; the label stays off
	// the Block, whose struct fits a cache line.
	labeled map[*Block]*Allocation

	// hist is the history being recorded, shared by the pools; lastHist
	// the one StopHistory ended (history.go).
	hist, lastHist *recorder

	// spills counts allocations that spilled to the offload tier;
	// spillReport is the first one's report, until AllocOp hands it to
	// onSpill (spill.go).
	spills      Moved
	spillLive   int64 // requested bytes of live spilled allocations
	spillReport *SpillEvent
	onSpill     func(SpillEvent)

	// copyFn moves bytes for Migrate (migrate.go); migrations counts them.
	copyFn CopyFunc
	// pinned, when set (NewCUDAManager), copies between page-locked host
	// memory and device memory by the host pointer (migrate_pinned.go).
	pinned     *pinnedCopier
	barrier    func(Stream) error // SetMigrateBarrier
	migrations Moved
	asyncMoves Moved // MigrateOn's (migrate_on.go)
	// sched is the placement scheduler, nil without one (scheduler.go).
	sched *Scheduler
	// allocHook is OnAlloc's function.
	allocHook func(*Allocation)
}

// RoleUsage is the statistics of one role.
type RoleUsage struct {
	// Allocated (rounded sizes) and Requested bytes of live allocations.
	Allocated, Requested Stat
	// Allocs and Frees count the calls.
	Allocs, Frees int64
}

// Stats is a Manager's statistics: per tier (zero for tiers without a
// backend), per role, and in total. The per-role and per-tier currents add
// up to the total's; the total's peaks are peaks of the sum.
type Stats struct {
	Tiers [NumTiers]Usage
	Roles [NumRoles]RoleUsage
	Total Usage
	// Limits is each tier's cap on reserved bytes (0: none).
	Limits [NumTiers]int64
	// Spills counts the allocations the device tier could not serve that
	// went to the offload tier instead (Policy.Spill).
	Spills Moved
	// Migrations counts the allocations Migrate moved (the Scheduler's
	// promotions and demotions among them).
	Migrations Moved
	// AsyncMoves counts the allocations MigrateOn moved with copies on
	// another stream (activation offload and its prefetch), apart from
	// Migrations.
	AsyncMoves Moved
}

// NewManager makes a manager over backends, at most one per tier. Tiers
// without one fall back as the fallback chain says (managed -> device ->
// host, staging -> host).
func NewManager(backends []Backend, cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(backends) == 0 {
		return nil, fmt.Errorf("memory: NewManager needs at least one backend: %w", ErrInvalidArgument)
	}
	m := &Manager{sync: cfg.StreamSync}
	m.mu.init()
	expandable, _ := cfg.Segments.expandable() // checked by Validate
	for i, b := range backends {
		if b == nil {
			return nil, fmt.Errorf("memory: NewManager: backend %d is nil: %w", i, ErrInvalidArgument)
		}
		t := b.Tier()
		if t >= NumTiers {
			return nil, fmt.Errorf("memory: NewManager: backend %s has unknown %s: %w", b.Name(), t, ErrInvalidArgument)
		}
		if old := m.pools[t]; old != nil {
			return nil, fmt.Errorf("memory: NewManager: backends %s and %s both provide tier %s: %w",
				old.backend.Name(), b.Name(), t, ErrInvalidArgument)
		}
		v, vm := b.(VirtualMemory)
		if expandable && vm {
			// newPool panics on a bad page: a custom backend's is input here.
			if err := checkGranularity("NewManager", b.Name(), v.Granularity()); err != nil {
				return nil, err
			}
		}
		plan, _ := cfg.PlanSteps.planned(t) // checked by Validate
		m.pools[t] = newPool(b, PoolConfig{Limit: cfg.Limits[t], MaxSplitSize: cfg.MaxSplitSize, StreamSync: cfg.StreamSync,
			Expandable: expandable && vm, PlanSteps: plan}, &m.mu, &m.total)
		m.pools[t].labelOf = m.labelOf
	}
	if dev, man := m.pools[TierDevice], m.pools[TierManaged]; dev != nil && man != nil {
		// Unified memory's pages live on the device that touches them (the
		// hybrid policy advises it to prefer the device): the device budget
		// counts them.
		dev.shared = func() int64 { return man.sinks.own.Reserved.Current }
		dev.releaseShared = func(wait bool) (int64, error) {
			var werr error
			if wait && len(man.pending) > 0 {
				werr = man.processEvents(true)
			}
			n, err := man.flushCache()
			return n, errors.Join(werr, err)
		}
	}
	m.linkBudgetPeers()
	m.setPolicy(cfg.Policy)
	return m, nil
}

// linkBudgetPeers lets each pool whose backend charges a HostBudget that
// other pools of m charge too (the CPU device's tiers all draw on one)
// release their cache before an allocation the budget refuses fails:
// bytes another tier merely caches are not a shortage (EmptyCache would
// give them back).
func (m *Manager) linkBudgetPeers() {
	for t, p := range m.pools {
		if p == nil {
			continue
		}
		b := budgetOf(p.backend)
		if b == nil {
			continue
		}
		var peers []*Pool
		for u, q := range m.pools {
			if u != t && q != nil && budgetOf(q.backend) == b {
				peers = append(peers, q)
			}
		}
		if len(peers) == 0 {
			continue
		}
		p.releasePeers = func() (int64, error) {
			var n int64
			var errs []error
			for _, q := range peers {
				r, err := q.flushCache()
				n += r
				errs = append(errs, err)
			}
			return n, errors.Join(errs...)
		}
	}
}

// NewHostManager makes a manager with a host backend for every tier: the
// CPU device's. The policy and the per-tier statistics behave as on a GPU,
// with host memory behind each tier. It panics if cfg is invalid (see
// Config.Validate).
func NewHostManager(cfg Config) *Manager {
	backends := make([]Backend, NumTiers)
	for t := range NumTiers {
		backends[t] = NewHostBackend(t)
	}
	m, err := NewManager(backends, cfg)
	if err != nil {
		panic(err)
	}
	return m
}

// Policy returns the policy in force.
func (m *Manager) Policy() Policy {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.policy
}

// SetPolicy changes the placement of later allocations; live ones stay
// where they are. The zero Policy means HybridPolicy(), as in Config.
// Roles placed on unknown tiers fail to allocate.
func (m *Manager) SetPolicy(p Policy) {
	m.mu.Lock()
	m.setPolicy(p)
	m.mu.Unlock()
}

// setPolicy installs p, or HybridPolicy() for the zero Policy.
func (m *Manager) setPolicy(p Policy) {
	if p.isZero() {
		p = HybridPolicy()
	}
	m.policy = p
	for r, pl := range p.Placements {
		m.route[r] = m.backed(pl.Tier)
	}
}

// backed is the first tier with a backend down t's fallback chain, or
// noTier (t unknown, or no backend down the chain).
func (m *Manager) backed(t Tier) Tier {
	for t < NumTiers && m.pools[t] == nil {
		t = fallback[t]
	}
	if t >= NumTiers {
		return noTier
	}
	return t
}

// StreamSync returns the StreamSync the manager's pools use (nil on the
// host). The CUDA manager's is a *CUDAStreams, which turns *cuda.Stream
// values into Streams.
func (m *Manager) StreamSync() StreamSync { return m.sync }

// Pool returns the pool of tier t, nil when t has no backend. Allocating
// from it directly bypasses the per-role statistics.
func (m *Manager) Pool(t Tier) *Pool {
	if t >= NumTiers {
		return nil
	}
	return m.pools[t]
}

// EmptyCache gives every fully free segment of every tier back to its
// backend. A tier whose pool was closed on its own (Pool.Close) holds
// nothing and gives nothing: it is no error
// (TestManagerEmptyCacheClosedPool).
func (m *Manager) EmptyCache() error {
	return m.eachPool("EmptyCache", (*Pool).emptyCache)
}

// EmptyStreamCache gives back the cache of stream s only (a released CUDA
// graph's private pool, CUDAStreams.Private): its fully free classic
// segments, held or not, and the free pages of its expandable segments
// (those once it is held no more); other streams keep their cache.
func (m *Manager) EmptyStreamCache(s Stream) error {
	return m.eachPool("EmptyStreamCache", func(p *Pool) error {
		_, err := p.releaseStreams(func(t Stream) bool { return t == s })
		return err
	})
}

// eachPool runs f on every pool with the manager's lock held and joins
// their errors; op names the call in the error of a closed manager.
func (m *Manager) eachPool(op string, f func(p *Pool) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("memory: manager: %s after close: %w", op, ErrClosed)
	}
	var errs []error
	for _, p := range m.pools {
		if p != nil {
			errs = append(errs, f(p))
		}
	}
	return errors.Join(errs...)
}

// InUse returns the bytes requested by live blocks of the Manager's pools,
// all tiers: its Allocations, and blocks taken from a tier's Pool directly
// (Manager.Pool), which share its statistics.
func (m *Manager) InUse() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total.Requested.Current
}

// ResetPeaks lowers every peak (per tier, per role, total) to its current
// value.
func (m *Manager) ResetPeaks() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pools {
		if p != nil {
			p.sinks.own.ResetPeaks()
		}
	}
	m.total.ResetPeaks()
	for r := range m.roles {
		m.roles[r].Allocated.resetPeak()
		m.roles[r].Requested.resetPeak()
	}
}

// Stats returns a consistent snapshot of the statistics.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats()
}

func (m *Manager) stats() Stats {
	var s Stats
	for t, p := range m.pools {
		if p != nil {
			s.Tiers[t] = p.sinks.own.snapshot()
		}
	}
	for t, p := range m.pools {
		if p != nil {
			s.Limits[t] = p.cfg.Limit
		}
	}
	s.Roles = m.roles
	s.Total = m.total.snapshot()
	s.Spills = m.spills
	s.Migrations = m.migrations
	s.AsyncMoves = m.asyncMoves
	return s
}

// Close gives all memory of every tier back to the backends and makes later
// calls fail with ErrClosed. Allocations still live are released too, and
// reported in an error wrapping ErrLeaked, per role; so are blocks still
// live that were allocated from its pools directly (Manager.Pool), as
// Pool.Close reports them.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("memory: manager closed twice: %w", ErrClosed)
	}
	m.closed = true
	var errs []error
	if m.live > 0 {
		errs = append(errs, m.leakError())
	}
	if err := m.directLeakError(); err != nil {
		errs = append(errs, err)
	}
	for _, p := range m.pools {
		if p != nil {
			if err := p.close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for r := range m.roles {
		m.roles[r].Allocated.Current = 0
		m.roles[r].Requested.Current = 0
	}
	m.live = 0
	m.labeled = nil
	for _, release := range m.owned {
		if err := release(); err != nil {
			errs = append(errs, err)
		}
	}
	m.owned = nil
	return errors.Join(errs...)
}

// leakError describes the live allocations, per role.
func (m *Manager) leakError() error {
	msg := fmt.Sprintf("memory: manager closed with %d live allocations (%s requested):", m.live, FormatBytes(m.allocationsRequested()))
	sep := " "
	var labels [NumRoles][]string
	for _, a := range m.labeled {
		labels[a.role] = append(labels[a.role], strconv.Quote(a.label))
	}
	for r, u := range m.roles {
		if n := u.Allocs - u.Frees; n > 0 {
			msg += fmt.Sprintf("%s%s %d (%s%s)", sep, Role(r), n, FormatBytes(u.Requested.Current), leakLabels(labels[r]))
			sep = ", "
		}
	}
	return fmt.Errorf("%s; their memory was released: %w", msg, ErrLeaked)
}

// allocationsRequested is the bytes requested by live allocations: the
// total's, less those of blocks allocated from the pools directly.
func (m *Manager) allocationsRequested() int64 {
	var n int64
	for _, u := range m.roles {
		n += u.Requested.Current
	}
	return n
}

// directLeakError describes the live blocks allocated from the pools
// directly (Manager.Pool) rather than by Alloc, nil when there are none:
// the pools' live blocks (pending ones count as freed, as in Pool.Close)
// less one per live allocation.
func (m *Manager) directLeakError() error {
	n := -int64(m.live)
	for _, p := range m.pools {
		if p != nil {
			n += p.sinks.own.Allocs - p.sinks.own.Frees
		}
	}
	if n <= 0 {
		return nil
	}
	return fmt.Errorf("memory: manager closed with %d live blocks allocated from its pools directly (%s requested); their memory was released: %w",
		n, FormatBytes(m.total.Requested.Current-m.allocationsRequested()), ErrLeaked)
}

// maxLeakLabels is how many labels a leak report names per role.
const maxLeakLabels = 8

// leakLabels lists the quoted labels of a role's leaked allocations, in
// order, for leakError: "" without any.
func leakLabels(labels []string) string {
	if len(labels) == 0 {
		return ""
	}
	slices.Sort(labels)
	more := ""
	if n := len(labels) - maxLeakLabels; n > 0 {
		labels, more = labels[:maxLeakLabels], fmt.Sprintf(" and %d more", n)
	}
	return "; labelled " + strings.Join(labels, ", ") + more
}

// labelOf is the label of the live allocation whose block is b, or "";
// with m.mu held.
func (m *Manager) labelOf(b *Block) string {
	if a := m.labeled[b]; a != nil {
		return a.label
	}
	return ""
}
