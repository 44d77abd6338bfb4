package memory

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The placement scheduler: the seed's two-level feedback queue, driven by
// what each step really touches. The tensor layer calls Allocation.Touch
// for every operand of every op; the Scheduler tracks the long-lived
// allocations (parameters, gradients, optimizer state, embeddings, frozen
// weights), and at each step boundary (Scheduler.Step) it turns their
// touch counts into accesses a step (an exponential average), keeps the
// hot ones in the device tier (the hot queue) and the cold ones in the
// offload tier (the cold queue: host-resident memory the device reads
// over the bus), and moves tensors between the two with Manager.Migrate so
// that the device's peak stays within the budget:
//
//   - demand is the peak, over the step just ended, of the device tier's
//     allocated bytes plus the live allocations that spilled (what the
//     device would have held without a budget; cached bytes are not
//     demand, the pool gives them back when its limit is reached), plus
//     the managed tier's reserved bytes, which the budget also covers;
//   - when demand passes Budget less Margin, tensors in the device tier
//     are demoted, coldest first (fewest accesses a step; the larger first
//     among equals, as each move frees more for the same traffic), until
//     the excess is covered; tensors with more than HotTouches accesses a
//     step are never demoted;
//   - a tensor with at most ColdTouches accesses a step is demoted even
//     without pressure (the seed's rule for rarely used data);
//   - a cold tensor is promoted back, hottest first, once it has fitted
//     under the budget less Margin for Patience steps in a row: the margin
//     and the patience are the hysteresis that keeps a tensor from moving
//     every step; only tensors whose role the policy places in the device
//     tier are promoted (those demoted or spilled), never one the policy
//     places elsewhere (an embedding table in managed memory);
//   - when the device tier refuses an allocation below the budget
//     (fragmentation: a classic pool's segments hold free bytes that no
//     request fits), the target drops under the level it held then; after
//     Retry steps in a row without such a refusal that level is forgotten
//     and the budget aimed at again (a first step's refusals, or a layout
//     that a trial of the placement cut and that is gone, need not cost
//     device memory for good), and each refusal after a forgetting
//     doubles the steps before the next one.
//
// Each Step returns the Plan: every tracked tensor with its bytes,
// accesses a step, tier, and why it is there.

// DefaultSchedulerMargin is the share of the budget a Scheduler keeps free
// unless told otherwise: room for a step's peak to vary and, on a classic
// pool, for the segments' cut ends.
const DefaultSchedulerMargin = 0.05

// SchedulerConfig tunes a Scheduler. Zero fields take the defaults.
type SchedulerConfig struct {
	// Budget is the device bytes the scheduler keeps the step's peak
	// under; 0 means the device tier's limit (Manager.SetLimit), and with
	// neither only ColdTouches moves anything.
	Budget int64
	// Margin is the share of Budget kept free (0: DefaultSchedulerMargin).
	Margin float64
	// HotTouches: tensors touched more often a step are never demoted
	// (0: no such bound). Finite.
	HotTouches float64
	// ColdTouches: tensors touched at most this often a step are demoted
	// even without pressure (0: only under pressure). Finite, and with
	// HotTouches set no more than it: a tensor cannot be both hot and
	// cold.
	ColdTouches float64
	// MinBytes: smaller allocations are not tracked (default 1 MiB).
	MinBytes int64
	// Patience is the number of steps in a row a cold tensor must fit
	// before it is promoted (default 3).
	Patience int
	// Decay weighs the past in the accesses-a-step average (default 0.5;
	// 0 would mean only the last step counts: use a tiny value for that).
	Decay float64
	// Retry is the steps in a row without a refusal below the budget
	// after which the level of the last one is forgotten (default 16;
	// doubled by each refusal after the first forgetting, up to 1024
	// times; negative: never forgotten).
	Retry int
	// Roles are the roles tracked (default parameter, frozen, embedding,
	// gradient, optimizer). Activations come and go within a step and are
	// the checkpointing's business, not the scheduler's.
	Roles []Role
}

func (c *SchedulerConfig) defaults() error {
	inUnit := func(x float64) bool { return x >= 0 && x < 1 }                 // false for NaN
	touches := func(x float64) bool { return x >= 0 && x <= math.MaxFloat64 } // finite, not NaN
	var bad []string
	if c.Budget < 0 {
		bad = append(bad, fmt.Sprintf("Budget %d is negative", c.Budget))
	}
	if !inUnit(c.Margin) {
		bad = append(bad, fmt.Sprintf("Margin %g is not in [0, 1)", c.Margin))
	}
	if !touches(c.HotTouches) {
		bad = append(bad, fmt.Sprintf("HotTouches %g is not a finite count >= 0", c.HotTouches))
	}
	if !touches(c.ColdTouches) {
		bad = append(bad, fmt.Sprintf("ColdTouches %g is not a finite count >= 0", c.ColdTouches))
	}
	if c.HotTouches > 0 && c.ColdTouches > c.HotTouches {
		bad = append(bad, fmt.Sprintf("ColdTouches %g is above HotTouches %g: a tensor touched between them would be both hot (never demoted) and cold (always demoted)",
			c.ColdTouches, c.HotTouches))
	}
	if c.MinBytes < 0 {
		bad = append(bad, fmt.Sprintf("MinBytes %d is negative", c.MinBytes))
	}
	if c.Patience < 0 {
		bad = append(bad, fmt.Sprintf("Patience %d is negative", c.Patience))
	}
	if !inUnit(c.Decay) {
		bad = append(bad, fmt.Sprintf("Decay %g is not in [0, 1)", c.Decay))
	}
	if len(bad) > 0 {
		return fmt.Errorf("memory: scheduler config: %s: %w", strings.Join(bad, "; "), ErrInvalidArgument)
	}
	if c.Margin == 0 {
		c.Margin = DefaultSchedulerMargin
	}
	if c.MinBytes == 0 {
		c.MinBytes = 1 << 20
	}
	if c.Patience == 0 {
		c.Patience = 3
	}
	if c.Decay == 0 {
		c.Decay = 0.5
	}
	if c.Retry == 0 {
		c.Retry = 16
	}
	if len(c.Roles) == 0 {
		c.Roles = []Role{RoleParameter, RoleFrozenWeight, RoleEmbedding, RoleGradient, RoleOptimizerState}
	}
	for _, r := range c.Roles {
		if r >= NumRoles {
			return fmt.Errorf("memory: scheduler tracks unknown %s: %w", r, ErrInvalidArgument)
		}
	}
	return nil
}

// Scheduler moves long-lived allocations between the device and offload
// tiers by how often each step touches them; see the package notes above.
// Make one with Manager.NewScheduler; call Step between training steps,
// when no kernel is reading the tracked allocations from another stream
// and no other goroutine is using them (a migrated allocation's Addr and
// Host change under the manager's lock, which their readers do not take).
type Scheduler struct {
	m       *Manager
	cfg     SchedulerConfig
	roles   [NumRoles]bool
	tracked map[*Allocation]*trackState
	steps   int
	// peak is the peak demand since the last Step: the device tier's
	// allocated bytes plus the live spilled ones (cached bytes are not
	// demand: the pool releases them under its limit).
	peak int64
	// capacity is the lowest device-allocated level at which the device
	// tier refused an allocation (a spill) so far, 0 before any: with
	// fragmentation (a classic pool's segments) the budget holds less
	// than its bytes, and the target is lowered to what it really held.
	capacity int64
	// refused: a refusal below the budget since the last Step; quiet: the
	// Steps in a row without one since capacity was set; retries: the
	// refusals since the first forgetting (Retry << retries quiet steps
	// before the next).
	refused        bool
	quiet, retries int
	forgotten      bool // capacity forgotten at least once
	// moved is the manager's MigrateOn bytes at the last Step (before
	// the first, when NewScheduler made it).
	moved int64
	// closed: Close was called; replaced: a later NewScheduler took its
	// place. Either way Step and Track fail with ErrClosed.
	closed, replaced bool
}

// trackState is what the scheduler knows of one allocation.
type trackState struct {
	seen    int64   // touches at the last Step
	rate    float64 // accesses a step, averaged
	steps   int     // steps observed
	fits    int     // steps in a row it would have fitted on the device
	why     string
	changed bool // moved at the last Step
}

// NewScheduler attaches a placement scheduler to m (one per manager; a
// second replaces the first, whose Step and Track then fail with
// ErrClosed). Allocations of the tracked roles made from now on are
// tracked; Track adds earlier ones. A config with a negative, NaN or
// infinite setting, or with ColdTouches above HotTouches, is refused
// (ErrInvalidArgument, naming the settings).
func (m *Manager) NewScheduler(cfg SchedulerConfig) (*Scheduler, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Scheduler{m: m, cfg: cfg, tracked: map[*Allocation]*trackState{}}
	for _, r := range cfg.Roles {
		s.roles[r] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("memory: NewScheduler after close: %w", ErrClosed)
	}
	s.peak, s.moved = s.demand(), m.asyncMoves.Bytes
	if old := m.sched; old != nil {
		old.replaced = true
		old.tracked = map[*Allocation]*trackState{}
	}
	m.sched = s
	return s, nil
}

// usable is the error of a Step or Track on a scheduler closed or
// replaced, else nil; with m.mu held.
func (s *Scheduler) usable(op string) error {
	switch {
	case s.m.closed:
		return fmt.Errorf("memory: scheduler %s after the manager's close: %w", op, ErrClosed)
	case s.closed:
		return fmt.Errorf("memory: scheduler %s after the scheduler was closed: %w", op, ErrClosed)
	case s.replaced:
		return fmt.Errorf("memory: scheduler %s on a scheduler replaced by a later NewScheduler (use that one): %w", op, ErrClosed)
	}
	return nil
}

// Track adds a live allocation made before the scheduler (of any role).
func (s *Scheduler) Track(a *Allocation) error {
	if _, err := s.m.liveBlock(a, "Track"); err != nil {
		return err
	}
	defer s.m.mu.Unlock()
	if err := s.usable("Track"); err != nil {
		return err
	}
	if _, ok := s.tracked[a]; !ok {
		s.tracked[a] = &trackState{seen: a.touches.Load()}
	}
	return nil
}

// Close detaches the scheduler; tracked allocations stay where they are.
// Later Steps and Tracks fail with ErrClosed; a second Close does nothing.
func (s *Scheduler) Close() {
	s.m.mu.Lock()
	if s.m.sched == s {
		s.m.sched = nil
	}
	s.closed = true
	s.tracked = map[*Allocation]*trackState{}
	s.m.mu.Unlock()
}

// onAlloc and onFree keep the tracked set; with m.mu held.
func (s *Scheduler) onAlloc(a *Allocation) {
	if s.roles[a.role] && a.size >= s.cfg.MinBytes {
		s.tracked[a] = &trackState{seen: a.touches.Load()}
	}
	s.onGrow()
}

func (s *Scheduler) onFree(a *Allocation) { delete(s.tracked, a) }

// onGrow raises the peak to the demand now, after an allocation, a move
// between tiers (Migrate, MigrateOn: one into the device raises it) or a
// Hold on the device; with m.mu held.
func (s *Scheduler) onGrow() {
	if d := s.demand(); d > s.peak {
		s.peak = d
	}
}

// onSpill notes that the device tier refused an allocation, with err,
// while it held held bytes (its demand: Pool.demand); with m.mu held. Only
// a refusal of a request that the budget had room for (held plus the
// request under the limit) is fragmentation and lowers the capacity; a
// request that would pass the limit even with every cached byte given
// back is the budget at work and says nothing of what the device holds
// (gpt2-medium's first step under 4 GiB refused its 786 MiB logits at
// 3.2 GiB held, and the target stayed 0.8 GiB under the budget for good).
func (s *Scheduler) onSpill(held int64, err error) {
	var oom *OOMError
	if errors.As(err, &oom) && oom.Cause == nil && oom.Limit > 0 && held+oom.Requested > oom.Limit {
		return
	}
	if s.capacity == 0 || held < s.capacity {
		s.capacity = held
	}
	s.refused = true
}

// retry forgets the capacity after enough Steps without a refusal below the
// budget and reports whether it did; with m.mu held, once a Step.
func (s *Scheduler) retry() bool {
	if s.refused {
		s.refused, s.quiet = false, 0
		if s.forgotten {
			s.retries++
		}
		return false
	}
	if s.capacity == 0 || s.cfg.Retry < 0 {
		return false
	}
	s.quiet++
	if s.quiet < s.cfg.Retry<<min(s.retries, 10) {
		return false
	}
	s.capacity, s.quiet, s.forgotten = 0, 0, true
	return true
}

// demand is what the device would hold now without a budget: its
// allocated bytes, the managed tier's (counted in the device's budget)
// and the live allocations that spilled; with m.mu held.
func (s *Scheduler) demand() int64 {
	d := s.m.spillLive
	if p := s.m.pools[TierDevice]; p != nil {
		d += p.demand()
	}
	return d
}

// PlanEntry is one tracked allocation in a Plan.
type PlanEntry struct {
	Label   string  `json:"label"` // Allocation.Label, else the op that made it
	Role    Role    `json:"role"`
	Bytes   int64   `json:"bytes"`
	Touches float64 `json:"touches_per_step"`
	Tier    Tier    `json:"tier"`
	Moved   bool    `json:"moved"` // moved by this Step
	Why     string  `json:"why"`
}

// Plan is what a Step decided.
type Plan struct {
	Step int `json:"step"`
	// Budget is the device bytes aimed at (0: none); Demand the step's
	// device peak plus its spills.
	Budget, Demand int64
	// Target is the demand aimed under: the budget less the margin, or
	// less when the device refused allocations below the budget
	// (fragmentation).
	Target int64
	// Retried: this Step forgot the level of the last refusal below the
	// budget, after SchedulerConfig.Retry steps (or more) without one.
	Retried bool
	// Demoted and Promoted are the bytes moved by this Step. Excess is
	// what the demand still passes the budget less its margin by after
	// the demotions: more than the scheduler could move (> 0 means the
	// next step will spill again; more checkpointing is the remedy).
	Demoted, Promoted, Excess int64
	// Pending is the bytes of cold allocations that fit the device and
	// wait out the scheduler's patience: later Steps will promote them
	// unless the demand grows. A plan with nothing moved and nothing
	// pending is settled: the steps after it run as this one did.
	Pending int64
	// Moved is the bytes MigrateOn moved since the last Step (for the
	// first, since NewScheduler): activations that waited in host memory
	// between the passes (checkpoint.Offload) and came back, bus traffic
	// that is the step's own, not the plan's.
	Moved int64
	// Entries are the tracked allocations, coldest first (fewest touches
	// a step), larger first among equals, then by address.
	Entries []PlanEntry `json:"entries"`
}

// Settled reports whether the Step moved nothing and has nothing waiting
// to move.
func (p Plan) Settled() bool { return p.Demoted == 0 && p.Promoted == 0 && p.Pending == 0 }

// OffloadTraffic is the bytes a step reads or writes in tracked
// allocations off the device (tier other than TierDevice): each one's size
// times its accesses a step, plus the bytes moved between tiers (Moved).
// It is what placement costs in bus traffic, against what recomputation
// costs in arithmetic.
func (p Plan) OffloadTraffic() int64 {
	n := float64(p.Moved)
	for _, e := range p.Entries {
		if e.Tier != TierDevice {
			n += float64(e.Bytes) * e.Touches
		}
	}
	return int64(n)
}

// Step observes the step that just ended and moves tracked allocations
// between the device and offload tiers; it returns the plan. A promotion
// the device refuses for lack of memory (fragmentation) leaves the tensor
// cold and lowers the target, as a spill's refusal does; a demotion the
// offload tier refuses for lack of memory leaves the tensor on the device
// and the rest of this Step's demotions undone (their entries say why,
// Plan.Excess what the demand still passes the target by); any other
// failed move ends the Step with its error (allocations moved before it
// stay moved).
// On a scheduler closed, or replaced by a later NewScheduler, or after the
// manager's Close, it fails with ErrClosed.
func (s *Scheduler) Step() (Plan, error) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := s.usable("step"); err != nil {
		return Plan{}, err
	}
	s.steps++
	budget := s.cfg.Budget
	dev := m.pools[TierDevice]
	if budget == 0 && dev != nil {
		budget = dev.cfg.Limit
	}
	plan := Plan{Step: s.steps, Budget: budget, Demand: s.peak, Moved: m.asyncMoves.Bytes - s.moved, Retried: s.retry()}
	s.moved = m.asyncMoves.Bytes
	cold := m.backed(TierOffload)
	entries := make([]*Allocation, 0, len(s.tracked))
	for a, st := range s.tracked {
		if a.b == nil { // freed while another scheduler replaced this one (onFree went there)
			delete(s.tracked, a)
			continue
		}
		now := a.touches.Load()
		d := float64(now - st.seen)
		st.seen = now
		if st.steps == 0 {
			st.rate = d
		} else {
			st.rate = s.cfg.Decay*st.rate + (1-s.cfg.Decay)*d
		}
		st.steps++
		st.changed = false
		entries = append(entries, a)
	}
	// Coldest first, larger first among equals, then by address for a
	// stable order.
	slices.SortFunc(entries, func(x, y *Allocation) int {
		return cmp.Or(cmp.Compare(s.tracked[x].rate, s.tracked[y].rate), cmp.Compare(y.size, x.size), cmp.Compare(x.b.addr, y.b.addr))
	})
	var err error
	if dev != nil && cold != TierDevice && cold < NumTiers && (cold != TierHost || hostMemory(dev.backend)) {
		err = s.move(&plan, entries, budget, cold)
	}
	for _, a := range entries {
		st := s.tracked[a]
		label := a.label
		if label == "" {
			label = a.op
		}
		plan.Entries = append(plan.Entries, PlanEntry{Label: label, Role: a.role, Bytes: a.size, Touches: st.rate, Tier: a.tier, Moved: st.changed, Why: st.why})
	}
	// The next window starts now.
	s.peak = s.demand()
	return plan, err
}

// move applies the rules to entries (coldest first); with m.mu held.
func (s *Scheduler) move(plan *Plan, entries []*Allocation, budget int64, cold Tier) error {
	target := int64(float64(budget) * (1 - s.cfg.Margin))
	if s.capacity > 0 && budget > 0 {
		// The device refused allocations below the budget: aim under what
		// it held then, by the same margin.
		target = min(target, s.capacity-int64(float64(budget)*s.cfg.Margin))
	}
	plan.Target = target
	// Tracked allocations that spilled are the scheduler's now: kept in
	// the cold tier on purpose, they are no longer overflow, and their
	// bytes are demand already met off the device.
	need := plan.Demand
	for _, a := range entries {
		if s.m.unspill(a) {
			need -= a.size
		}
	}
	excess := int64(0)
	if budget > 0 {
		excess = need - target
	}
	hot := func(st *trackState) bool { return s.cfg.HotTouches > 0 && st.rate > s.cfg.HotTouches }
	var coldFull error // the cold tier refused a demotion: no more this step
	for _, a := range entries {
		st := s.tracked[a]
		if a.tier != TierDevice {
			continue
		}
		switch {
		case s.cfg.ColdTouches > 0 && st.rate <= s.cfg.ColdTouches:
			st.why = fmt.Sprintf("cold: %.1f accesses a step <= %.1f", st.rate, s.cfg.ColdTouches)
		case excess > 0 && !hot(st):
			st.why = fmt.Sprintf("demoted: the device peak passed the budget by %s", FormatBytes(excess))
		case hot(st):
			st.why = fmt.Sprintf("hot: %.1f accesses a step > %.1f", st.rate, s.cfg.HotTouches)
			continue
		case budget == 0:
			st.why = "device: no budget"
			continue
		default:
			st.why = "device: the step fits the budget"
			continue
		}
		if a.b.crossUsed() {
			st.why = "device: in use on another stream (RecordStream), not moved this step"
			continue
		}
		if coldFull != nil {
			st.why = fmt.Sprintf("device: %s refused an earlier demotion this step (%v)", cold, shortCause(coldFull))
			continue
		}
		if err := s.m.migrate(a, a.b, cold); err != nil {
			if !errors.Is(err, ErrOutOfMemory) {
				return err
			}
			// The cold tier is full (its limit, or the host's pinned
			// memory): the tensor stays on the device and the step goes
			// on over the budget (Plan.Excess says by how much), as
			// training would without a scheduler; the next step tries again.
			coldFull = err
			st.why = fmt.Sprintf("device: %s refused it (%v)", cold, shortCause(err))
			continue
		}
		st.changed, st.fits = true, 0
		excess -= a.size
		plan.Demoted += a.size
	}
	// Promote, hottest first, what fits with room to spare (everything
	// fits without a budget).
	plan.Excess = max(0, excess)
	room := target - need + plan.Demoted
	fits := func(n int64) bool { return budget == 0 || n <= room }
	for i := len(entries) - 1; i >= 0; i-- {
		a := entries[i]
		st := s.tracked[a]
		if a.tier == TierDevice || st.changed {
			continue
		}
		if r := s.m.route[a.role]; r != TierDevice {
			// Not demoted nor spilled: the policy placed it there (an
			// embedding table in managed memory, with its advice).
			st.why = fmt.Sprintf("%s: the policy places %s there", a.tier, a.role)
			st.fits = 0
			continue
		}
		if s.cfg.ColdTouches > 0 && st.rate <= s.cfg.ColdTouches {
			st.why = fmt.Sprintf("cold: %.1f accesses a step <= %.1f", st.rate, s.cfg.ColdTouches)
			st.fits = 0
			continue
		}
		if !fits(a.size) {
			st.why = fmt.Sprintf("cold: the device has %s to spare under the budget, it needs %s", FormatBytes(max(room, 0)), FormatBytes(a.size))
			st.fits = 0
			continue
		}
		if a.b.crossUsed() {
			st.why = "cold: in use on another stream (RecordStream), not moved this step"
			continue
		}
		st.fits++
		if st.fits < s.cfg.Patience {
			st.why = fmt.Sprintf("cold: fits the device, waiting %d of %d steps", st.fits, s.cfg.Patience)
			plan.Pending += a.size
			room -= a.size // what waits is promoted in order: later ones fit after it
			continue
		}
		if err := s.m.migrate(a, a.b, TierDevice); err != nil {
			if !errors.Is(err, ErrOutOfMemory) {
				return err
			}
			// The device refused it with room under the budget
			// (fragmentation): it stays cold, and the target drops as
			// for a spill's refusal.
			s.onSpill(s.m.pools[TierDevice].demand(), err)
			st.why = fmt.Sprintf("cold: the device refused it (%v)", shortCause(err))
			st.fits = 0
			continue
		}
		st.changed, st.fits = true, 0
		st.why = fmt.Sprintf("promoted: fitted the device for %d steps", s.cfg.Patience)
		plan.Promoted += a.size
		room -= a.size
	}
	return nil
}

// String prints the plan as a table, its entries in Entries' order: the
// coldest first (fewest touches a step), larger first among equals.
func (p Plan) String() string {
	var b strings.Builder
	budget := "none"
	if p.Budget > 0 {
		budget = FormatBytes(p.Budget)
	}
	retried := ""
	if p.Retried {
		retried = " (the level of the last refusal below the budget forgotten: no refusal since)"
	}
	fmt.Fprintf(&b, "placement plan after step %d: budget %s, target %s%s, device demand %s, demoted %s, promoted %s, still over by %s\n",
		p.Step, budget, FormatBytes(p.Target), retried, FormatBytes(p.Demand), FormatBytes(p.Demoted), FormatBytes(p.Promoted), FormatBytes(p.Excess))
	fmt.Fprintf(&b, "%-48s %-10s %12s %10s %-8s  %s\n", "tensor", "role", "bytes", "touches", "tier", "why")
	for _, e := range p.Entries {
		mark := ""
		if e.Moved {
			mark = " *"
		}
		fmt.Fprintf(&b, "%-48s %-10s %12s %10.1f %-8s  %s%s\n", e.Label, e.Role, FormatBytes(e.Bytes), e.Touches, e.Tier, e.Why, mark)
	}
	return b.String()
}
