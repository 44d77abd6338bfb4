//go:build amd64 && !race

#include "textflag.h"

// func spinPause()
//
// Thirty PAUSE instructions: a spinning waiter's delay between reads of
// the state (the runtime's procyield).
TEXT ·spinPause(SB), NOSPLIT, $0-0
	MOVL $30, AX

again:
	PAUSE
	DECL AX
	JNZ  again
	RET
