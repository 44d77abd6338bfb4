//go:build !amd64 || purego

package tensor

import (
	"bytes"
	"runtime"
)

// goid is the calling goroutine's id, read from the header of its stack
// trace ("goroutine 7 [running]:"); on amd64 the address of its runtime g
// (goid_amd64.go). It costs a walk of the stack, so only Background's
// NewScope calls it, track only while Background's stack holds scopes of
// two goroutines, and placeKeptOnly only while Background has a scope
// open.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	var id uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			break
		}
		id = id*10 + uint64(ch-'0')
	}
	return id
}
