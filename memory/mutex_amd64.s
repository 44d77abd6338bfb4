//go:build amd64 && !race

#include "textflag.h"
#include "funcdata.h"
#include "go_asm.h"

// func unlock(m *mutex)
//
// Unlock's fast path: with the mutex held (state not 0) and no waiter at
// the head of the queue (waiting 0), a plain store of 0 to state releases
// it; otherwise unlockSlow(m).
TEXT ·unlock(SB), NOSPLIT, $8-8
	NO_LOCAL_POINTERS
	MOVQ m+0(FP), AX
	CMPL mutex_state(AX), $0
	JEQ  slow
	CMPL mutex_waiting(AX), $0
	JNE  slow
	MOVL $0, mutex_state(AX)
	RET

slow:
	MOVQ AX, 0(SP)
	CALL ·unlockSlow(SB)
	RET

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
