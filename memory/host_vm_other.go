//go:build !unix

package memory

// Without mmap the host backend has no virtual memory: expandable segments
// fall back to classic ones there.
func newHostBackend(tier Tier, name string) Backend {
	return &hostBackend{tier: tier, name: name}
}
