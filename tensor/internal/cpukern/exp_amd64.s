//go:build !purego

#include "textflag.h"

// Eight copies of each float32 constant of exp32 (see mathf.go), as
// 32-byte vectors for memory operands.

// -87.33 (expLo32)
DATA expLo<>+0(SB)/4, $0xc2aea8f6
DATA expLo<>+4(SB)/4, $0xc2aea8f6
DATA expLo<>+8(SB)/4, $0xc2aea8f6
DATA expLo<>+12(SB)/4, $0xc2aea8f6
DATA expLo<>+16(SB)/4, $0xc2aea8f6
DATA expLo<>+20(SB)/4, $0xc2aea8f6
DATA expLo<>+24(SB)/4, $0xc2aea8f6
DATA expLo<>+28(SB)/4, $0xc2aea8f6
GLOBL expLo<>(SB), RODATA|NOPTR, $32

// 88.37 (expHi32)
DATA expHi<>+0(SB)/4, $0x42b0bd71
DATA expHi<>+4(SB)/4, $0x42b0bd71
DATA expHi<>+8(SB)/4, $0x42b0bd71
DATA expHi<>+12(SB)/4, $0x42b0bd71
DATA expHi<>+16(SB)/4, $0x42b0bd71
DATA expHi<>+20(SB)/4, $0x42b0bd71
DATA expHi<>+24(SB)/4, $0x42b0bd71
DATA expHi<>+28(SB)/4, $0x42b0bd71
GLOBL expHi<>(SB), RODATA|NOPTR, $32

// 1/2
DATA expC2<>+0(SB)/4, $0x3f000000
DATA expC2<>+4(SB)/4, $0x3f000000
DATA expC2<>+8(SB)/4, $0x3f000000
DATA expC2<>+12(SB)/4, $0x3f000000
DATA expC2<>+16(SB)/4, $0x3f000000
DATA expC2<>+20(SB)/4, $0x3f000000
DATA expC2<>+24(SB)/4, $0x3f000000
DATA expC2<>+28(SB)/4, $0x3f000000
GLOBL expC2<>(SB), RODATA|NOPTR, $32

// 1/6
DATA expC3<>+0(SB)/4, $0x3e2aaaab
DATA expC3<>+4(SB)/4, $0x3e2aaaab
DATA expC3<>+8(SB)/4, $0x3e2aaaab
DATA expC3<>+12(SB)/4, $0x3e2aaaab
DATA expC3<>+16(SB)/4, $0x3e2aaaab
DATA expC3<>+20(SB)/4, $0x3e2aaaab
DATA expC3<>+24(SB)/4, $0x3e2aaaab
DATA expC3<>+28(SB)/4, $0x3e2aaaab
GLOBL expC3<>(SB), RODATA|NOPTR, $32

// 1/24
DATA expC4<>+0(SB)/4, $0x3d2aaaab
DATA expC4<>+4(SB)/4, $0x3d2aaaab
DATA expC4<>+8(SB)/4, $0x3d2aaaab
DATA expC4<>+12(SB)/4, $0x3d2aaaab
DATA expC4<>+16(SB)/4, $0x3d2aaaab
DATA expC4<>+20(SB)/4, $0x3d2aaaab
DATA expC4<>+24(SB)/4, $0x3d2aaaab
DATA expC4<>+28(SB)/4, $0x3d2aaaab
GLOBL expC4<>(SB), RODATA|NOPTR, $32

// 1/120
DATA expC5<>+0(SB)/4, $0x3c088889
DATA expC5<>+4(SB)/4, $0x3c088889
DATA expC5<>+8(SB)/4, $0x3c088889
DATA expC5<>+12(SB)/4, $0x3c088889
DATA expC5<>+16(SB)/4, $0x3c088889
DATA expC5<>+20(SB)/4, $0x3c088889
DATA expC5<>+24(SB)/4, $0x3c088889
DATA expC5<>+28(SB)/4, $0x3c088889
GLOBL expC5<>(SB), RODATA|NOPTR, $32

// 1/720
DATA expC6<>+0(SB)/4, $0x3ab60b61
DATA expC6<>+4(SB)/4, $0x3ab60b61
DATA expC6<>+8(SB)/4, $0x3ab60b61
DATA expC6<>+12(SB)/4, $0x3ab60b61
DATA expC6<>+16(SB)/4, $0x3ab60b61
DATA expC6<>+20(SB)/4, $0x3ab60b61
DATA expC6<>+24(SB)/4, $0x3ab60b61
DATA expC6<>+28(SB)/4, $0x3ab60b61
GLOBL expC6<>(SB), RODATA|NOPTR, $32

// 1/5040
DATA expC7<>+0(SB)/4, $0x39500d01
DATA expC7<>+4(SB)/4, $0x39500d01
DATA expC7<>+8(SB)/4, $0x39500d01
DATA expC7<>+12(SB)/4, $0x39500d01
DATA expC7<>+16(SB)/4, $0x39500d01
DATA expC7<>+20(SB)/4, $0x39500d01
DATA expC7<>+24(SB)/4, $0x39500d01
DATA expC7<>+28(SB)/4, $0x39500d01
GLOBL expC7<>(SB), RODATA|NOPTR, $32

// func expShiftAVX2(dst, src *float32, n int, shift float32, acc *[8]float64) int
//
// For i in [0, n) in blocks of 8 (n a multiple of 8): x = src[i] - shift;
// dst[i] = e^x; acc[0:4] += float64 of lanes 0-3, acc[4:8] += lanes 4-7.
// It stops before the first block holding an x outside
// (expLo32, expHi32) or a NaN, and returns the count done; the caller
// finishes that block in Go. The arithmetic is exp32's: k = round(x
// log2e), r = x - k ln2 (Cody-Waite, two FMAs), e^r - 1 = r + r^2 p(r)
// with p of degree 5 by Horner's rule in FMAs, 2^k in the exponent bits.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS shift+24(FP), Y15
	MOVQ acc+32(FP), R8
	VMOVUPD 0(R8), Y13
	VMOVUPD 32(R8), Y14
	MOVL $0x3fb8aa3b, AX // log2e
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	MOVL $0x4b400000, AX // shifter
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	MOVL $0x3f318000, AX // ln2hi
	VMOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVL $0xb95e8083, AX // ln2lo
	VMOVD AX, X9
	VPBROADCASTD X9, Y9
	MOVL $0x7f, AX // bias
	VMOVD AX, X8
	VPBROADCASTD X8, Y8
	XORQ R9, R9

loop:
	CMPQ CX, $8
	JLT done
	VMOVUPS (SI), Y0
	VSUBPS Y15, Y0, Y0 // x = src - shift
	VCMPPS $0x1e, expLo<>(SB), Y0, Y1 // x > lo (ordered: false for NaN)
	VCMPPS $0x11, expHi<>(SB), Y0, Y2 // x < hi
	VANDPS Y1, Y2, Y1
	VMOVMSKPS Y1, AX
	CMPL AX, $0xff
	JNE done

	VMOVAPS Y11, Y1
	VFMADD231PS Y12, Y0, Y1 // t = x*log2e + shifter
	VSUBPS Y11, Y1, Y2      // n = t - shifter
	VPSUBD Y11, Y1, Y3      // k = bits(t) - bits(shifter)
	VFNMADD231PS Y10, Y2, Y0 // r = x - n*ln2hi
	VFNMADD231PS Y9, Y2, Y0  // r -= n*ln2lo

	VMOVUPS expC7<>(SB), Y4
	VFMADD213PS expC6<>(SB), Y0, Y4 // p = p*r + c6
	VFMADD213PS expC5<>(SB), Y0, Y4
	VFMADD213PS expC4<>(SB), Y0, Y4
	VFMADD213PS expC3<>(SB), Y0, Y4
	VFMADD213PS expC2<>(SB), Y0, Y4
	VMULPS Y0, Y0, Y5       // r^2
	VFMADD213PS Y0, Y5, Y4  // q = p*r^2 + r

	VPADDD Y8, Y3, Y3       // k + 127
	VPSLLD $23, Y3, Y3      // s = 2^k
	VFMADD213PS Y3, Y3, Y4  // e = q*s + s
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
