package tensor

// ScopeSlots is the length of s's list of tensors, holes included (for
// TestScopeDoesNotGrowWithReleasedTensors).
func ScopeSlots(s *Scope) int {
	s.ctx.mu.Lock()
	defer s.ctx.mu.Unlock()
	return len(s.tensors)
}
