//go:build amd64 && !purego

#include "textflag.h"

// func curG() uintptr
//
// The calling goroutine's runtime g, as an integer, from thread-local
// storage (the runtime's get_tls): its identity while it runs.
TEXT ·curG(SB), NOSPLIT, $0-8
	MOVQ TLS, CX
	MOVQ 0(CX)(TLS*1), AX
	MOVQ AX, ret+0(FP)
	RET
