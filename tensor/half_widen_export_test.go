package tensor

// SetHalfWidenGroup sets the most float32 bytes the half-gradient widening
// takes at once (ops_half_widen.go) for the tests of package tensor_test;
// the returned func restores it.
func SetHalfWidenGroup(n int) func() {
	old := halfWidenGroup
	halfWidenGroup = n
	return func() { halfWidenGroup = old }
}
