//go:build amd64 && !purego

package tensor

// goid identifies the calling goroutine among the running ones, for the
// scopes' checks of which goroutine opened Background's innermost scope
// (Scope.gid; ctx.go's track and placeKeptOnly): the address of its
// runtime g, read from thread-local storage (goid_amd64.s), a few
// nanoseconds where the stack trace's header (goid_other.go) costs a walk
// of the stack, which an op on parameters alone paid while Background had a
// scope open. A g is reused only after its goroutine exits, and a
// goroutine that opened a scope lives while the scope is open (closing it
// is its job), so two goroutines it compares never share one.
func goid() uint64 { return uint64(curG()) }

// curG is the calling goroutine's runtime g, as an integer (goid_amd64.s).
func curG() uintptr
