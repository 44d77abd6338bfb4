// Package amp is automatic mixed precision: autocast regions and their
// per-context state.
//
// The autocast state lives in the caller's tensor.Ctx (one slot, like
// autograd's grad mode), not in a process global: each goroutine's
// context has its own, and an autocast region is a function run inside
// it (Autocast(c, tensor.BFloat16, fn)), which nests and restores the
// previous state also on a panic. A function-scoped region reads as Go's
// other scoped state (a held lock, a transaction) and cannot be left
// open by a forgotten exit call; the state a region sets is readable with
// Current, and With re-enters a saved state, which activation
// checkpointing uses to recompute a region in the precision its forward
// ran in.
//
// Layering: amp imports only tensor, so autograd's ops can consult the
// autocast state; checkpoint and nn sit above both.
package amp
