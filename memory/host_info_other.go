//go:build !linux

package memory

// hostMemInfo cannot tell the free host memory outside Linux.
func hostMemInfo() (free, total int64, ok bool) { return 0, 0, false }
