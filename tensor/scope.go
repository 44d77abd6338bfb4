package tensor

import (
	"fmt"

	"github.com/strata-ml/strata/memory"
)

// Scope owns the tensors created in its context while it is the
// innermost open scope there, and releases them all when it closes
// (TensorFlow.js's tidy). A training step runs inside one scope, so the
// user never frees by hand: parameters, gradients of parameters and
// optimizer state are created outside it or kept with Keep.
//
// Scopes nest per context (Ctx) and close innermost first: a Ctx's
// scopes are a stack, so open and close them on the one goroutine that
// uses the context (a goroutine may hand the context on to another while
// it waits, as a test does to its subtests). Kernels may use many
// goroutines internally; that does not matter to scopes.
type Scope struct {
	ctx     *Ctx
	parent  *Scope
	tensors []*Tensor // in the order made; nil where one was released or kept
	holes   int       // the nils in tensors (shrink)
	role    memory.Role
	closed  bool
	gid     uint64 // the goroutine that opened it (Background's scopes only)
	handoff bool   // opened by another goroutine than its parent (counted in ctx.handoffs)
}

// NewScope opens a scope in c nested in its innermost one; it inherits
// that scope's allocation role (memory.RoleActivation for an outermost
// scope).
//
// A scope of Background records the goroutine that opens it (goid: a few
// nanoseconds on amd64, microseconds elsewhere), so that two goroutines using Background at once are
// told so (see Ctx) instead of releasing each other's tensors.
func (c *Ctx) NewScope() *Scope {
	var g uint64
	if c == background {
		g = goid()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &Scope{ctx: c, parent: c.top, role: memory.RoleActivation, gid: g}
	if c.top != nil {
		s.role = c.top.role
		c.setHandoff(s)
	}
	c.top = s
	return s
}

// setHandoff sets s.handoff for s's parent now, keeping c.handoffs (c.mu
// held).
func (c *Ctx) setHandoff(s *Scope) {
	h := s.parent != nil && s.parent.gid != s.gid
	switch {
	case h && !s.handoff:
		c.handoffs++
	case !h && s.handoff:
		c.handoffs--
	}
	s.handoff = h
}

// SetRole sets the memory role of tensors created in s from now on.
func (s *Scope) SetRole(r memory.Role) {
	s.ctx.mu.Lock()
	s.role = r
	s.ctx.mu.Unlock()
}

// Close releases every tensor still owned by s and makes its parent
// current. Close is idempotent.
//
// Closing a scope that is not the innermost open one of its context (a
// child opened after it is still open) is a misuse: s is closed all the
// same, its tensors released and the children left open (they are closed
// by whoever opened them), and Close then panics with an *OpError
// wrapping ErrArgument ("scope closed out of order"). It is what two
// goroutines sharing one Ctx do (Background, say, through the
// package-level functions), their scopes interleaved on its one stack, or
// a scope opened with NewScope and never closed.
func (s *Scope) Close() {
	if err := s.close(); err != nil {
		panic(err)
	}
}

// close is Close returning the out-of-order error instead of panicking.
func (s *Scope) close() *OpError {
	c := s.ctx
	c.mu.Lock()
	if s.closed {
		c.mu.Unlock()
		return nil
	}
	s.closed = true
	innermost := c.unlink(s)
	ts := s.tensors
	s.tensors = nil
	c.mu.Unlock()
	releaseAll(ts)
	if !innermost {
		return errScopeOrder(c)
	}
	return nil
}

// unlink takes s off c's stack of open scopes (c.mu held) and reports
// whether it was the innermost. A scope above s (opened later, still open)
// gets s's parent as its own.
func (c *Ctx) unlink(s *Scope) (innermost bool) {
	if s.handoff {
		s.handoff = false
		c.handoffs--
	}
	if c.top == s {
		c.top = s.parent
		return true
	}
	for ch := c.top; ch != nil; ch = ch.parent {
		if ch.parent == s {
			ch.parent = s.parent
			c.setHandoff(ch)
			break
		}
	}
	return false
}

// errSharedCtx is the error of an op of one goroutine that would put its
// result in an open scope of another goroutine (see Ctx.track).
func errSharedCtx(op string, c *Ctx) *OpError {
	return &OpError{Op: op, Err: ErrArgument, Msg: fmt.Sprintf(
		"the innermost open scope of %v was opened by another goroutine, which would release this goroutine's tensors "+
			"when it closes: a Ctx's scopes are a stack, used by one goroutine at a time: give each goroutine its own Ctx "+
			"(tensor.NewCtx) instead of sharing one (Background, which the package-level functions use, is one)", c)}
}

// errScopeOrder is the error of a scope of c closed while a scope opened
// after it is still open.
func errScopeOrder(c *Ctx) *OpError {
	return &OpError{Op: "Scope.Close", Err: ErrArgument, Msg: fmt.Sprintf(
		"scope closed out of order: a scope opened after it in %v is still open; a Ctx's scopes are a stack, "+
			"closed innermost first, by the one goroutine that uses it: give each goroutine its own Ctx (tensor.NewCtx) "+
			"instead of sharing one (Background, which the package-level functions use, is one)", c)}
}

// releaseAll releases the tensors a closing scope owned.
func releaseAll(ts []*Tensor) {
	for _, t := range ts {
		if t != nil {
			t.scope = nil
			t.ref.byScope = true
			t.Release()
		}
	}
}

// closeAfter closes s at the end of a call that ran fn inside it
// (WithScope, Tidy): the out-of-order error (see Close) is raised when fn
// returned, and dropped when fn panicked, whose panic goes on.
func closeAfter(s *Scope, returned bool) {
	if err := s.close(); err != nil && returned {
		panic(err)
	}
}

// nilFunc panics with an *OpError wrapping ErrArgument when the function
// op was given is nil (isNil), before op opens a scope or changes a role:
// a plain nil call would be a runtime error, which Try does not catch.
func nilFunc(op string, isNil bool) {
	if isNil {
		fail(op, ErrArgument, "nil function")
	}
}

// Len is the number of tensors s still owns.
func (s *Scope) Len() int {
	s.ctx.mu.Lock()
	defer s.ctx.mu.Unlock()
	n := 0
	for _, t := range s.tensors {
		if t != nil {
			n++
		}
	}
	return n
}

// Owns reports whether s owns t now: t was made or adopted while s was
// its context's innermost scope, and has been neither released nor
// handed on (Keep, Ctx.Adopt) since. A nil s or t owns nothing.
func (s *Scope) Owns(t *Tensor) bool {
	if s == nil || t == nil {
		return false
	}
	s.ctx.mu.Lock()
	defer s.ctx.mu.Unlock()
	return t.scope == s && !t.ref.released.Load()
}

// WithScope runs fn inside a new scope of c and closes it afterwards, also
// when fn panics. A scope fn opened and left open (or another goroutine's,
// see Ctx) makes it panic as Scope.Close does, after fn returned. A nil
// fn is an *OpError wrapping ErrArgument, as for Tidy and WithRole.
func (c *Ctx) WithScope(fn func()) {
	nilFunc("WithScope", fn == nil)
	s := c.NewScope()
	returned := false
	defer func() { closeAfter(s, returned) }()
	fn()
	returned = true
}

// Tidy runs fn inside a new scope of c and releases everything fn created
// except the tensor it returns, which moves to the enclosing scope. A
// returned tensor that fn did not create (a kept parameter, one of an
// outer scope) stays where it was. A nil fn is an *OpError wrapping
// ErrArgument.
func (c *Ctx) Tidy(fn func() *Tensor) *Tensor {
	nilFunc("Tidy", fn == nil)
	s := c.NewScope()
	var out *Tensor
	returned := false
	defer func() {
		own := out != nil && out.scope == s
		if own {
			untrack(out)
		}
		if err := s.close(); err != nil && returned {
			if own {
				out.Release()
			}
			panic(err)
		}
		if own {
			if err := c.track("Tidy", out); err != nil {
				out.Release()
				if returned {
					panic(err)
				}
			}
		}
	}()
	out = fn()
	returned = true
	return out
}

// WithRole runs fn with the role of c's innermost scope set to r; what fn
// creates stays in that scope. Without an open scope, a temporary one
// carries the role and gives up its tensors untracked, as they would be
// without a scope. A nil fn is an *OpError wrapping ErrArgument.
func (c *Ctx) WithRole(r memory.Role, fn func()) {
	nilFunc("WithRole", fn == nil)
	c.mu.Lock()
	s := c.top
	var old memory.Role
	if s != nil {
		old = s.role
		s.role = r
	}
	c.mu.Unlock()
	if s == nil {
		tmp := c.NewScope()
		tmp.SetRole(r)
		returned := false
		defer func() {
			c.mu.Lock()
			ts := tmp.tensors
			for _, t := range ts {
				if t != nil {
					t.scope = nil
				}
			}
			tmp.tensors = nil
			tmp.closed = true
			innermost := c.unlink(tmp)
			c.mu.Unlock()
			for _, t := range ts {
				if t != nil && !t.ref.released.Load() {
					guard(t) // owned by no scope now
				}
			}
			if !innermost && returned {
				panic(errScopeOrder(c))
			}
		}()
		fn()
		returned = true
		return
	}
	defer func() {
		c.mu.Lock()
		s.role = old
		c.mu.Unlock()
	}()
	fn()
}

// NewScope opens a scope of Background (see Ctx.NewScope). Background is
// for one goroutine at a time: a goroutine of a concurrent program opens
// its scopes in a Ctx of its own (NewCtx).
func NewScope() *Scope { return background.NewScope() }

// WithScope runs fn inside a new scope of Background (see Ctx.WithScope),
// for programs that do their tensor work on one goroutine at a time: two
// goroutines calling it at once get an *OpError wrapping ErrArgument
// naming the misuse (see Ctx); give each its own Ctx (NewCtx) and call
// its WithScope.
func WithScope(fn func()) { background.WithScope(fn) }

// Tidy is Background().Tidy(fn).
func Tidy(fn func() *Tensor) *Tensor { return background.Tidy(fn) }

// CurrentRole is Background's role (see Ctx.Role).
func CurrentRole() memory.Role { return background.Role() }

// WithRole is Background().WithRole(r, fn).
func WithRole(r memory.Role, fn func()) { background.WithRole(r, fn) }
