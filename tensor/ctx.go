package tensor

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/strata-ml/strata/memory"
)

// Ctx is the state one goroutine's tensor work runs in: its stack of
// scopes (which own the tensors created while they are open), the memory
// role new tensors get, and the state of the packages above (autograd's
// grad mode, amp's autocast, checkpoint's recorder) in slots keyed by
// CtxKey. The doc of package autograd explains the design.
//
// A Ctx is the caller's value: a goroutine that trains or infers makes
// its own with NewCtx and creates its inputs with Ctx's methods (Zeros,
// FromInt32s, ...). Every tensor records the Ctx it was made in, and an
// op takes its Ctx from its operands, so the whole computation stays in
// the caller's Ctx without passing it to every op. Tensors taken out of
// scope tracking with Keep (parameters, optimizer state) belong to no Ctx
// and may be read by ops of any Ctx, from any goroutine, at the same
// time; writing them (an optimizer step) while another goroutine reads
// them is a data race, as for any Go value.
//
// The package-level functions (WithScope, Tidy, Zeros, ...) use the
// process's default context, Background: a convenience for programs that
// do all their tensor work on one goroutine at a time. An op whose operands belong
// to no Ctx (an op on parameters alone) also uses Background; the result
// is adopted by the Ctx of the first op that combines it with a tensor of
// another Ctx, as long as no scope of Background owns it (one does only
// when the calling goroutine opened Background's innermost scope, so a
// goroutine working in its own Ctx never hands such a result to another
// goroutine's Background scope). Mixing tensors
// of two different Ctx values in an op that makes a tensor panics with
// ErrArgument (its result would have no one owner); the in-place ops
// (CopyFrom, WriteNarrow, AddInPlace, the optimizer steps, ...) make none
// and take operands of any contexts.
//
// What is safe: a Ctx's methods do not corrupt its state when called
// concurrently (one mutex guards its stack), but a Ctx has one stack of
// scopes, and a scope owns whatever is made in the Ctx while it is the
// innermost: two goroutines working in one Ctx at once put their tensors
// in each other's scopes, which release them while they are in use. So
// one goroutine at a time works in a Ctx (a goroutine may hand it to
// another and wait, as a test does to its subtests): give each goroutine
// its own Ctx. Misuse is reported, not silently obeyed: closing a scope
// that is not the innermost panics with an *OpError wrapping ErrArgument
// ("scope closed out of order", see Scope.Close), and in Background,
// whose scopes record the goroutine that opened them, an op of one
// goroutine while another's scope is the innermost fails the same way
// instead of handing its result to that scope. A goroutine that opens no
// scope of its own is not caught: its tensors go to the innermost scope
// of whichever goroutine has one open.
type Ctx struct {
	mu       sync.Mutex
	top      *Scope          // innermost open scope, nil when none
	handoffs int             // open scopes opened by another goroutine than their parent (Background only)
	ext      [maxCtxKeys]any // guarded by mu
	name     string
	live     atomic.Int64 // bytes of storage allocated in c and not yet freed
}

// NewCtx returns an empty context: no open scope, role memory.RoleOther
// until a scope sets one.
func NewCtx() *Ctx { return &Ctx{name: "ctx"} }

var background = &Ctx{name: "background"}

// Background is the process's default context, used by the package-level
// functions and by ops on tensors that belong to no context. It is for
// one goroutine at a time, as every Ctx (see Ctx for what is safe): two
// goroutines that open scopes in it at once get an *OpError wrapping
// ErrArgument that says so. Concurrent programs give each goroutine its
// own context (NewCtx).
func Background() *Ctx { return background }

// backgroundHeld serialises WithBackground: the goroutine running fn
// (owner, 0 when none) holds mu.
var backgroundHeld struct {
	mu    sync.Mutex
	owner atomic.Uint64
}

// WithBackground runs fn holding Background for the calling goroutine
// among the callers of WithBackground: another goroutine's call waits
// until fn returns (or panics); calls nest on one goroutine. It is for
// code that runs work in Background on behalf of a goroutine working in a
// context of its own (package checkpoint's regions over kept tensors
// alone, whose context is Background): such work opens scopes in
// Background and uses its slots, which two goroutines doing it at once
// would interleave. It does not make Background safe for goroutines that
// use it without WithBackground. A nil fn is an *OpError wrapping
// ErrArgument.
func WithBackground(fn func()) {
	nilFunc("WithBackground", fn == nil)
	g := goid()
	if backgroundHeld.owner.Load() == g { // held by this goroutine: nested
		fn()
		return
	}
	backgroundHeld.mu.Lock()
	backgroundHeld.owner.Store(g)
	defer func() {
		backgroundHeld.owner.Store(0)
		backgroundHeld.mu.Unlock()
	}()
	fn()
}

func (c *Ctx) String() string { return fmt.Sprintf("tensor.Ctx(%s %p)", c.name, c) }

// CtxKey names one package's slot in every Ctx (see NewCtxKey).
type CtxKey struct{ i int }

const maxCtxKeys = 8

var (
	ctxKeyMu    sync.Mutex
	ctxKeyNames []string
)

// NewCtxKey reserves a slot for a package's per-context state; packages
// call it once, from a package-level variable. It panics after 8 keys.
func NewCtxKey(name string) CtxKey {
	ctxKeyMu.Lock()
	defer ctxKeyMu.Unlock()
	if len(ctxKeyNames) == maxCtxKeys {
		panic(fmt.Sprintf("tensor: NewCtxKey(%q): all %d slots taken by %v", name, maxCtxKeys, ctxKeyNames))
	}
	ctxKeyNames = append(ctxKeyNames, name)
	return CtxKey{len(ctxKeyNames) - 1}
}

// Value returns the state stored under k, or nil.
func (c *Ctx) Value(k CtxKey) any {
	c.mu.Lock()
	v := c.ext[k.i]
	c.mu.Unlock()
	return v
}

// ValueOrInit returns the state stored under k, first storing init() there
// when the slot is empty (atomically: concurrent callers get one value).
func (c *Ctx) ValueOrInit(k CtxKey, init func() any) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ext[k.i] == nil {
		c.ext[k.i] = init()
	}
	return c.ext[k.i]
}

// SetValue stores v under k and returns what was there.
func (c *Ctx) SetValue(k CtxKey, v any) (old any) {
	c.mu.Lock()
	old, c.ext[k.i] = c.ext[k.i], v
	c.mu.Unlock()
	return old
}

// BytesInUse is the number of bytes of storage allocated in c (by its
// creation methods and by ops over its tensors) and not yet freed, kept
// tensors included: a goroutine's own view of its memory, for finding
// leaks. A storage counts against the context it was allocated in until
// it is freed, whichever context its views move to.
func (c *Ctx) BytesInUse() int64 { return c.live.Load() }

// Role is the memory role new tensors of c get: that of the innermost
// open scope, or memory.RoleOther without one.
func (c *Ctx) Role() memory.Role {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.top == nil {
		return memory.RoleOther
	}
	return c.top.role
}

// ctxOf is the context of an op over ts: the one context among them other
// than Background; Background when some operand is Background's and not an
// orphan; else nil, which place turns into an orphan of Background. Kept
// tensors (no context) do not count. Orphans among ts (results of ops on
// kept tensors alone, owned by no scope) are adopted by the op's context,
// so an op on parameters alone (a view of a weight, say) becomes the
// caller's as soon as it meets the caller's data.
func ctxOf(op string, ts ...*Tensor) *Ctx {
	var c *Ctx
	bg := false
	for _, t := range ts {
		switch {
		case t == nil || t.ctx == nil || t.orphan || t.ctx == c:
		case t.ctx == background:
			bg = true
		case c != nil:
			fail(op, ErrArgument, "operands belong to two contexts (%v and %v): a tensor of one goroutine's Ctx used in another's", c, t.ctx)
		default:
			c = t.ctx
		}
	}
	if c == nil {
		if bg {
			return background
		}
		return nil
	}
	for _, t := range ts {
		if t != nil && t.orphan {
			c.adopt(t)
		}
	}
	return c
}

// CtxOf is the context an op over ts runs in (Background when none of
// them belongs to a context): custom ops create their outputs with its
// methods (CtxOf(g).Zeros(...)) so that they stay in the caller's context.
// It panics with ErrArgument when ts belong to two contexts.
func CtxOf(ts ...*Tensor) *Ctx {
	if c := ctxOf("CtxOf", ts...); c != nil {
		return c
	}
	return background
}

// place gives t, just made, to c (see ctxOf): to c's innermost scope, or
// for c == nil to Background's, as an orphan when Background has none
// or the calling goroutine did not open it (placeKeptOnly).
//
// When c's innermost scope is another goroutine's (see Ctx.track), t is
// released and the error returned.
func place(op string, t *Tensor, c *Ctx) *OpError {
	if c == nil {
		placeKeptOnly(t)
		return nil
	}
	if err := c.track(op, t); err != nil {
		t.Release()
		return err
	}
	return nil
}

// placeKeptOnly places t, made by an op over kept tensors alone, in
// Background: in its innermost scope when the calling goroutine opened
// it, else as an orphan, owned by no scope. Such an op reads nothing of
// Background's, and it is how a goroutine working in its own Ctx runs the
// ops of its model on parameters alone (a weight's transpose, a slice of
// the position embeddings, autocast's weight casts): put in the scope of
// another goroutine using Background, t would be released when that
// goroutine closes it, while still in use. Finding the goroutine (goid)
// is paid only while Background has a scope open: a load from
// thread-local storage on amd64, a walk of the stack elsewhere.
func placeKeptOnly(t *Tensor) {
	c := background
	t.ctx, t.orphan = c, false
	var g uint64
	c.mu.Lock()
	for c.top != nil && g == 0 {
		c.mu.Unlock()
		g = goid()
		c.mu.Lock()
	}
	if s := c.top; s != nil && s.gid == g {
		s.add(t)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	t.orphan = true
	guard(t)
}

// Kept reports whether t belongs to no context: made by NewKept or
// taken out by Keep, its caller's to release (an orphan, whose Ctx is
// nil too, is not kept: it joins the first context that combines it
// with its own tensors).
func (t *Tensor) Kept() bool { return t.ctx == nil }

// InBackgroundScope reports whether the calling goroutine opened
// Background's innermost open scope: whether an op over kept tensors
// alone run now puts its result there (see placeKeptOnly) rather than
// making it an orphan, so that such an op may take Background's state
// (autograd's autocast precision and op hook) as its own. A goroutine working in a
// context of its own gets false, whatever another goroutine does in
// Background; finding the goroutine costs as in placeKeptOnly, and
// nothing while Background has no scope open.
func InBackgroundScope() bool {
	c := background
	c.mu.Lock()
	open := c.top != nil
	c.mu.Unlock()
	if !open {
		return false
	}
	g := goid()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.top != nil && c.top.gid == g
}

// Ctx is the context the tensor belongs to: nil for a kept tensor and for
// an orphan (the result of an op on kept tensors alone that no scope
// owns; it joins the context of the first op that combines it with
// another context's tensor).
func (t *Tensor) Ctx() *Ctx {
	if t.orphan {
		return nil
	}
	return t.ctx
}

// track hands t, just made in c, to c's innermost scope; with no scope
// open, t gets the leak safety net (guard). While c's stack holds scopes
// of two goroutines (handoffs > 0: only Background's scopes record their
// goroutine, see NewScope), t goes to the innermost scope only from the
// goroutine that opened it: from another, track returns the misuse as an
// error (t untracked), where it would otherwise put t in a scope that
// another goroutine closes while t is in use.
func (c *Ctx) track(op string, t *Tensor) *OpError {
	t.ctx = c
	t.orphan = false
	var g uint64
	c.mu.Lock()
	for c.handoffs > 0 && g == 0 {
		c.mu.Unlock()
		g = goid()
		c.mu.Lock()
	}
	s := c.top
	if s != nil && c.handoffs > 0 && s.gid != g {
		c.mu.Unlock()
		return errSharedCtx(op, c)
	}
	if s != nil {
		s.add(t)
	}
	c.mu.Unlock()
	if s == nil {
		guard(t)
	}
	return nil
}

// add makes s the owner of t (s.ctx.mu held).
func (s *Scope) add(t *Tensor) {
	t.scope = s
	t.scopeIdx = len(s.tensors)
	s.tensors = append(s.tensors, t)
}

// untrack takes t out of its scope; it keeps its context.
func untrack(t *Tensor) {
	s := t.scope
	if s == nil {
		return
	}
	c := s.ctx
	c.mu.Lock()
	if t.scope == s {
		if t.scopeIdx < len(s.tensors) && s.tensors[t.scopeIdx] == t {
			s.tensors[t.scopeIdx] = nil
			s.holes++
			s.shrink()
		}
		t.scope = nil
	}
	c.mu.Unlock()
}

// shrink keeps a scope's list of tensors as long as what it owns (c.mu
// held): without it, a scope around a long loop that releases what each
// pass makes grew by a slot a tensor for its whole life. Holes at the end
// go at once (the common case: the newest tensor released first); once
// they are most of a long list, the list is compacted, each moved tensor
// told its new index.
func (s *Scope) shrink() {
	n := len(s.tensors)
	for n > 0 && s.tensors[n-1] == nil {
		n--
		s.holes--
	}
	clear(s.tensors[n:])
	s.tensors = s.tensors[:n]
	if s.holes < 64 || 2*s.holes < n {
		return
	}
	k := 0
	for _, t := range s.tensors {
		if t != nil {
			t.scopeIdx = k
			s.tensors[k] = t
			k++
		}
	}
	clear(s.tensors[k:])
	s.tensors, s.holes = s.tensors[:k], 0
}

// adopt moves t into c's innermost scope. It panics with track's error,
// t then owned by no scope, and with ErrArgument for a nil t.
func (c *Ctx) adopt(t *Tensor) {
	if t == nil {
		fail("Adopt", ErrArgument, "nil tensor")
	}
	untrack(t)
	if err := c.track("Adopt", t); err != nil {
		guard(t)
		panic(err)
	}
}

// Adopt hands t to c's innermost scope (after Keep, or for a tensor made
// in another context), and makes c its context. A nil t is an *OpError
// wrapping ErrArgument.
func (c *Ctx) Adopt(t *Tensor) *Tensor { c.adopt(t); return t }

// AdoptOrphan hands t to c's innermost scope when t is an orphan (the
// result of an op on kept tensors alone that no scope owns), as the next
// op combining it with c's data would, and reports whether it did. A kept
// tensor, a released one and one of a context are left as they are: the
// way autograd gives a scope the orphans a recorded graph holds.
func (c *Ctx) AdoptOrphan(t *Tensor) bool {
	if t == nil || !t.orphan || t.Released() {
		return false
	}
	c.adopt(t)
	return true
}

// Keep takes the tensors out of scope tracking and out of their context:
// the caller now owns them and releases them (or keeps them for the
// program's lifetime), and ops of any context may read them.
func Keep(ts ...*Tensor) {
	for _, t := range ts {
		if t != nil {
			untrack(t)
			// Only a tensor not yet kept is written: Keep (autograd.Param)
			// of a kept weight, from goroutines whose ops read it at the
			// same time, must not write its fields.
			if t.ctx != nil || t.orphan {
				t.ctx, t.orphan = nil, false
			}
			guard(t) // the caller owns it now
		}
	}
}

// detached is the context NewKept allocates in: no scope is ever opened
// in it, so what it makes is owned by no scope.
var detached = &Ctx{name: "detached"}

// NewKept allocates an uninitialised tensor that belongs to no context and
// no scope, as if made and passed to Keep at once: the way to make
// parameters and optimizer state from any goroutine. Errors as Ctx.New.
func NewKept(dev Device, dt DType, role memory.Role, shape ...int) (*Tensor, error) {
	t, err := newTensor("NewKept", detached, dev, dt, role, shape)
	if err == nil {
		t.ctx = nil
	}
	return t, err
}

// Adopt hands t to Background's innermost scope.
func Adopt(t *Tensor) { background.adopt(t) }
