package tensor

import (
	"sync"

	"github.com/strata-ml/strata/memory"
)

// Scope owns the tensors created while it is the innermost open scope and
// releases them all when it closes (TensorFlow.js's tidy). A training
// step runs inside one scope, so the user never frees by hand: parameters,
// gradients of parameters and optimizer state are created outside it or
// kept with Keep.
//
// Scopes form one stack per process, guarded by a mutex: open and close
// them on the goroutine that runs the model. Kernels may use many
// goroutines internally; that does not matter to scopes.
type Scope struct {
	parent  *Scope
	tensors []*Tensor
	role    memory.Role
	closed  bool
}

var (
	scopeMu  sync.Mutex
	curScope *Scope
)

// NewScope opens a scope nested in the current one; it inherits the
// current allocation role.
func NewScope() *Scope {
	scopeMu.Lock()
	defer scopeMu.Unlock()
	s := &Scope{parent: curScope, role: memory.RoleActivation}
	if curScope != nil {
		s.role = curScope.role
	}
	curScope = s
	return s
}

// SetRole sets the memory role of tensors created in s from now on.
func (s *Scope) SetRole(r memory.Role) {
	scopeMu.Lock()
	s.role = r
	scopeMu.Unlock()
}

// Close releases every tensor still owned by s and makes its parent
// current. Closing a scope that has open children closes them too. Close
// is idempotent.
func (s *Scope) Close() {
	scopeMu.Lock()
	if s.closed {
		scopeMu.Unlock()
		return
	}
	// Close open children first (they are above s on the stack).
	for curScope != nil && curScope != s {
		c := curScope
		curScope = c.parent
		c.closed = true
		ts := c.tensors
		c.tensors = nil
		scopeMu.Unlock()
		releaseAll(ts)
		scopeMu.Lock()
	}
	s.closed = true
	ts := s.tensors
	s.tensors = nil
	if curScope == s {
		curScope = s.parent
	}
	scopeMu.Unlock()
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
	scopeMu.Lock()
	defer scopeMu.Unlock()
	n := 0
	for _, t := range s.tensors {
		if t != nil {
			n++
		}
	}
	return n
}

// WithScope runs fn inside a new scope and closes it afterwards, also
// when fn panics.
func WithScope(fn func()) {
	s := NewScope()
	defer s.Close()
	fn()
}

// Tidy runs fn inside a new scope, releases everything fn created except
// the tensor it returns, which moves to the enclosing scope.
func Tidy(fn func() *Tensor) *Tensor {
	s := NewScope()
	var out *Tensor
	defer func() {
		if out != nil {
			untrack(out)
		}
		s.Close()
		if out != nil {
			track(out)
		}
	}()
	out = fn()
	return out
}

// Keep takes the tensors out of scope tracking: the caller now owns them
// and releases them (or keeps them for the program's lifetime).
func Keep(ts ...*Tensor) {
	for _, t := range ts {
		if t != nil {
			untrack(t)
		}
	}
}

// Adopt hands t to the current scope (after Keep, or for a tensor made
// outside any scope). Without an open scope it does nothing.
func Adopt(t *Tensor) { untrack(t); track(t) }

// CurrentRole is the memory role new tensors get: that of the innermost
// scope, or memory.RoleOther outside any scope.
func CurrentRole() memory.Role {
	scopeMu.Lock()
	defer scopeMu.Unlock()
	if curScope == nil {
		return memory.RoleOther
	}
	return curScope.role
}

// WithRole runs fn with the current scope's role set to r (in a new scope
// that owns what fn creates and does not release it: it hands it to the
// enclosing scope).
func WithRole(r memory.Role, fn func()) {
	scopeMu.Lock()
	s := curScope
	var old memory.Role
	if s != nil {
		old = s.role
		s.role = r
	}
	scopeMu.Unlock()
	if s == nil {
		// No scope: a temporary one carries the role, then gives up its
		// tensors untracked, as they would be without a scope.
		tmp := NewScope()
		tmp.SetRole(r)
		defer func() {
			scopeMu.Lock()
			for _, t := range tmp.tensors {
				if t != nil {
					t.scope = nil
				}
			}
			tmp.tensors = nil
			tmp.closed = true
			curScope = tmp.parent
			scopeMu.Unlock()
		}()
		fn()
		return
	}
	defer func() {
		scopeMu.Lock()
		s.role = old
		scopeMu.Unlock()
	}()
	fn()
}

func track(t *Tensor) {
	scopeMu.Lock()
	if s := curScope; s != nil {
		t.scope = s
		t.scopeIdx = len(s.tensors)
		s.tensors = append(s.tensors, t)
	}
	scopeMu.Unlock()
}

func untrack(t *Tensor) {
	scopeMu.Lock()
	if s := t.scope; s != nil {
		if t.scopeIdx < len(s.tensors) && s.tensors[t.scopeIdx] == t {
			s.tensors[t.scopeIdx] = nil
		}
		t.scope = nil
	}
	scopeMu.Unlock()
}
