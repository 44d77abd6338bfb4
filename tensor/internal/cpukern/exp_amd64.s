//go:build !purego

#include "textflag.h"
#include "simd_amd64.h"

// func expShiftAVX2(dst, src *float32, n int, shift float32, acc *[8]float64) int
//
// For i in [0, n) in blocks of 8 (n a multiple of 8): x = src[i] - shift;
// dst[i] = e^x; acc[0:4] += float64 of lanes 0-3, acc[4:8] += lanes 4-7.
// Lanes with x < expZero32 (masked attention scores, -Inf) give exactly
// 0, the correctly rounded result. It stops before the first block holding
// an x in [expZero32, expLo32], at or above expHi32, or NaN, and returns
// the count done; the caller finishes that block in Go.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS shift+24(FP), Y15
	MOVQ acc+32(FP), R8
	VMOVUPD 0(R8), Y13
	VMOVUPD 32(R8), Y14
	EXP_CONSTS
	XORQ R9, R9

loop:
	CMPQ CX, $8
	JLT done
	VMOVUPS (SI), Y0
	VSUBPS Y15, Y0, Y0 // x = src - shift
	VCMPPS $0x1e, expLo<>(SB), Y0, Y1 // x > lo (ordered: false for NaN)
	VCMPPS $0x11, expHi<>(SB), Y0, Y2 // x < hi
	VANDPS Y1, Y2, Y1
	VCMPPS $0x11, expZero<>(SB), Y0, Y7 // x < -104: the result is 0
	VORPS Y7, Y1, Y1
	VMOVMSKPS Y1, AX
	CMPL AX, $0xff
	JNE done

	EXP8(Y0, Y4, Y1, Y2, Y3)
	VANDNPS Y4, Y7, Y4 // 0 in the x < -104 lanes
	VMOVUPS Y4, (DI)

	VCVTPS2PD X4, Y5
	VADDPD Y5, Y13, Y13
	VEXTRACTF128 $1, Y4, X6
	VCVTPS2PD X6, Y6
	VADDPD Y6, Y14, Y14

	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	ADDQ $8, R9
	JMP loop

done:
	VMOVUPD Y13, 0(R8)
	VMOVUPD Y14, 32(R8)
	VZEROUPPER
	MOVQ R9, ret+40(FP)
	RET
