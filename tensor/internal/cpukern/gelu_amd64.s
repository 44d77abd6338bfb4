//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// GELU_ARG computes, from x in Y0, Y1 = x^2 and Y2 = a = -2u =
// -2 geluK x (1 + geluC x^2), then checks the block: if any a is at or
// above expHi32 or NaN (x below about -10, or NaN) it jumps to done,
// leaving the block to Go; lanes with a <= expLo32 get the mask Y7, where
// e^a is below 2^-126 and 1 + e^a rounds to exactly 1.
// Constants: Y13 geluC, Y14 -2 geluK, Y15 1.
#define GELU_ARG \
	VMULPS Y0, Y0, Y1 \
	VMOVAPS Y1, Y2 \
	VFMADD213PS Y15, Y13, Y2 \
	VMULPS Y14, Y0, Y3 \
	VMULPS Y3, Y2, Y2 \
	VCMPPS $0x11, expHi<>(SB), Y2, Y3 \
	VMOVMSKPS Y3, AX \
	CMPL AX, $0xff \
	JNE done \
	VCMPPS $0x12, expLo<>(SB), Y2, Y7

#define GELU_CONSTS \
	EXP_CONSTS \
	MOVL $0x3d372713, AX \
	VMOVD AX, X13 \
	VPBROADCASTD X13, Y13 \
	MOVL $0xbfcc422a, AX \
	VMOVD AX, X14 \
	VPBROADCASTD X14, Y14 \
	MOVL $0x3f800000, AX \
	VMOVD AX, X15 \
	VPBROADCASTD X15, Y15

// func geluAVX2(dst, src *float32, n int) int
//
// dst[i] = x / (1 + e^a), a = -2 sqrt(2/pi) (x + 0.044715 x^3), for
// blocks of 8 up to n (a multiple of 8); see gelu32. Returns the count
// done, stopping before a block GELU_ARG rejects. dst may alias src.
TEXT ·geluAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	GELU_CONSTS
	XORQ R9, R9

loop:
	CMPQ CX, $8
	JLT done
	VMOVUPS (SI), Y0
	GELU_ARG
	EXP8(Y2, Y4, Y1, Y5, Y6)
	VANDNPS Y4, Y7, Y4
	VADDPS Y15, Y4, Y4
	VDIVPS Y4, Y0, Y4
	VMOVUPS Y4, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	ADDQ $8, R9
	JMP loop

done:
	VZEROUPPER
	MOVQ R9, ret+24(FP)
	RET

// func geluBackwardAVX2(dx, x, dy *float32, n int) int
//
// dx[i] = dy[i] (s + 2 x s (1-s) du), s = 1/(1 + e^a) = sigmoid(2u),
// du = sqrt(2/pi) (1 + 3*0.044715 x^2); see geluGrad32. Blocks of 8 up
// to n; returns the count done. dx may alias dy.
TEXT ·geluBackwardAVX2(SB), NOSPLIT, $0-40
	MOVQ dx+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ dy+16(FP), DX
	MOVQ n+24(FP), CX
	GELU_CONSTS
	XORQ R9, R9

loop:
	CMPQ CX, $8
	JLT done
	VMOVUPS (SI), Y0
	GELU_ARG
	VMULPS geluC3K<>(SB), Y1, Y1
	VADDPS geluK<>(SB), Y1, Y1 // du
	EXP8(Y2, Y4, Y3, Y5, Y6)
	VANDNPS Y4, Y7, Y4
	VADDPS Y15, Y4, Y4
	VDIVPS Y4, Y15, Y4   // s
	VMULPS Y4, Y4, Y5
	VSUBPS Y5, Y4, Y5    // s - s^2
	VADDPS Y0, Y0, Y6    // 2x
	// 2x (s - s^2) before du, as geluGrad32 orders it: where s is 1 the
	// product is 0 and stays 0, where 2x du would overflow (x above
	// about 1.2e13) and make 0 x inf = NaN.
	VMULPS Y5, Y6, Y6    // 2x (s - s^2)
	VFMADD213PS Y4, Y1, Y6 // s + du 2x (s - s^2)
	VMULPS (DX), Y6, Y6
	VMOVUPS Y6, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	SUBQ $8, CX
	ADDQ $8, R9
	JMP loop

done:
	VZEROUPPER
	MOVQ R9, ret+32(FP)
	RET
