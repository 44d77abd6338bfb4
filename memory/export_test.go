package memory

// MixedWorkload is churnWorkload for the external tests (the timing
// harnesses of pool_pair_timing_test.go).
var MixedWorkload = churnWorkload
