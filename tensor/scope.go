package tensor

import (
	"github.com/strata-ml/strata/memory"
)

// Scope owns the tensors created in its context while it is the
// innermost open scope there, and releases them all when it closes
// (TensorFlow.js's tidy). A training step runs inside one scope, so the
// user never frees by hand: parameters, gradients of parameters and
// optimizer state are created outside it or kept with Keep.
//
// Scopes nest per context (Ctx): open and close them on the goroutine
// that uses the context. Kernels may use many goroutines internally; that
// does not matter to scopes.
type Scope struct {
	ctx     *Ctx
	parent  *Scope
	tensors []*Tensor
	role    memory.Role
	closed  bool
}

// NewScope opens a scope in c nested in its innermost one; it inherits
// that scope's allocation role (memory.RoleActivation for an outermost
// scope).
func (c *Ctx) NewScope() *Scope {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &Scope{ctx: c, parent: c.top, role: memory.RoleActivation}
	if c.top != nil {
		s.role = c.top.role
	}
	c.top = s
	return s
}

// SetRole sets the memory role of tensors created in s from now on.
func (s *Scope) SetRole(r memory.Role) {
	s.ctx.mu.Lock()
	s.role = r
	s.ctx.mu.Unlock()
}

// Close releases every tensor still owned by s and makes its parent
// current. Closing a scope that has open children closes them too. Close
// is idempotent.
func (s *Scope) Close() {
	c := s.ctx
	c.mu.Lock()
	if s.closed {
		c.mu.Unlock()
		return
	}
	// Close open children first (they are above s on the stack).
	for c.top != nil && c.top != s {
		ch := c.top
		c.top = ch.parent
		ch.closed = true
		ts := ch.tensors
		ch.tensors = nil
		c.mu.Unlock()
		releaseAll(ts)
		c.mu.Lock()
	}
	s.closed = true
	ts := s.tensors
	s.tensors = nil
	if c.top == s {
		c.top = s.parent
	}
	c.mu.Unlock()
	releaseAll(ts)
}

func releaseAll(ts []*Tensor) {
	for _, t := range ts {
		if t != nil {
			t.scope = nil
			t.Release()
		}
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

// WithScope runs fn inside a new scope of c and closes it afterwards, also
// when fn panics.
func (c *Ctx) WithScope(fn func()) {
	s := c.NewScope()
	defer s.Close()
	fn()
}

// Tidy runs fn inside a new scope of c and releases everything fn created
// except the tensor it returns, which moves to the enclosing scope. A
// returned tensor that fn did not create (a kept parameter, one of an
// outer scope) stays where it was.
func (c *Ctx) Tidy(fn func() *Tensor) *Tensor {
	s := c.NewScope()
	var out *Tensor
	defer func() {
		own := out != nil && out.scope == s
		if own {
			untrack(out)
		}
		s.Close()
		if own {
			c.track(out)
		}
	}()
	out = fn()
	return out
}

// WithRole runs fn with the role of c's innermost scope set to r; what fn
// creates stays in that scope. Without an open scope, a temporary one
// carries the role and gives up its tensors untracked, as they would be
// without a scope.
func (c *Ctx) WithRole(r memory.Role, fn func()) {
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
			c.top = tmp.parent
			c.mu.Unlock()
			for _, t := range ts {
				if t != nil && !t.ref.released {
					guard(t) // owned by no scope now
				}
			}
		}()
		fn()
		return
	}
	defer func() {
		c.mu.Lock()
		s.role = old
		c.mu.Unlock()
	}()
	fn()
}

// NewScope opens a scope of Background (see Ctx.NewScope).
func NewScope() *Scope { return background.NewScope() }

// WithScope runs fn inside a new scope of Background (see Ctx.WithScope).
func WithScope(fn func()) { background.WithScope(fn) }

// Tidy is Background().Tidy(fn).
func Tidy(fn func() *Tensor) *Tensor { return background.Tidy(fn) }

// CurrentRole is Background's role (see Ctx.Role).
func CurrentRole() memory.Role { return background.Role() }

// WithRole is Background().WithRole(r, fn).
func WithRole(r memory.Role, fn func()) { background.WithRole(r, fn) }
