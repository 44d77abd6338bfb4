//go:build !linux

package memory

// hostMemoryLimit cannot tell the memory this process may use outside
// Linux: the CPU device then has no budget unless STRATA_HOST_MEMORY sets
// one.
func hostMemoryLimit() (int64, string) { return 0, "" }
