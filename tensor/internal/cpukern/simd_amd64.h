// Shared by the AVX2+FMA kernels (exp_amd64.s, gelu_amd64.s): the float32
// constants of exp32 (mathf.go) as 32-byte vectors for memory operands,
// and the eight-lane exp. Symbols ending in <> are private to each .s
// file that includes this header.


// expLo32
DATA expLo<>+0(SB)/4, $0xc2aea8f6
DATA expLo<>+4(SB)/4, $0xc2aea8f6
DATA expLo<>+8(SB)/4, $0xc2aea8f6
DATA expLo<>+12(SB)/4, $0xc2aea8f6
DATA expLo<>+16(SB)/4, $0xc2aea8f6
DATA expLo<>+20(SB)/4, $0xc2aea8f6
DATA expLo<>+24(SB)/4, $0xc2aea8f6
DATA expLo<>+28(SB)/4, $0xc2aea8f6
GLOBL expLo<>(SB), RODATA|NOPTR, $32

// expHi32
DATA expHi<>+0(SB)/4, $0x42b0bd71
DATA expHi<>+4(SB)/4, $0x42b0bd71
DATA expHi<>+8(SB)/4, $0x42b0bd71
DATA expHi<>+12(SB)/4, $0x42b0bd71
DATA expHi<>+16(SB)/4, $0x42b0bd71
DATA expHi<>+20(SB)/4, $0x42b0bd71
DATA expHi<>+24(SB)/4, $0x42b0bd71
DATA expHi<>+28(SB)/4, $0x42b0bd71
GLOBL expHi<>(SB), RODATA|NOPTR, $32

// expZero32
DATA expZero<>+0(SB)/4, $0xc2d00000
DATA expZero<>+4(SB)/4, $0xc2d00000
DATA expZero<>+8(SB)/4, $0xc2d00000
DATA expZero<>+12(SB)/4, $0xc2d00000
DATA expZero<>+16(SB)/4, $0xc2d00000
DATA expZero<>+20(SB)/4, $0xc2d00000
DATA expZero<>+24(SB)/4, $0xc2d00000
DATA expZero<>+28(SB)/4, $0xc2d00000
GLOBL expZero<>(SB), RODATA|NOPTR, $32

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

// geluK = sqrt(2/pi)
DATA geluK<>+0(SB)/4, $0x3f4c422a
DATA geluK<>+4(SB)/4, $0x3f4c422a
DATA geluK<>+8(SB)/4, $0x3f4c422a
DATA geluK<>+12(SB)/4, $0x3f4c422a
DATA geluK<>+16(SB)/4, $0x3f4c422a
DATA geluK<>+20(SB)/4, $0x3f4c422a
DATA geluK<>+24(SB)/4, $0x3f4c422a
DATA geluK<>+28(SB)/4, $0x3f4c422a
GLOBL geluK<>(SB), RODATA|NOPTR, $32

// 3 geluC geluK
DATA geluC3K<>+0(SB)/4, $0x3ddb33b6
DATA geluC3K<>+4(SB)/4, $0x3ddb33b6
DATA geluC3K<>+8(SB)/4, $0x3ddb33b6
DATA geluC3K<>+12(SB)/4, $0x3ddb33b6
DATA geluC3K<>+16(SB)/4, $0x3ddb33b6
DATA geluC3K<>+20(SB)/4, $0x3ddb33b6
DATA geluC3K<>+24(SB)/4, $0x3ddb33b6
DATA geluC3K<>+28(SB)/4, $0x3ddb33b6
GLOBL geluC3K<>(SB), RODATA|NOPTR, $32

// EXP_CONSTS loads the register constants of EXP8: Y12 log2e, Y11 the
// rounding shifter 1.5*2^23, Y10 ln2 (high part), Y9 ln2 (low part), Y8
// the exponent bias 127 (as int32).
#define EXP_CONSTS \
	MOVL $0x3fb8aa3b, AX \
	VMOVD AX, X12 \
	VPBROADCASTD X12, Y12 \
	MOVL $0x4b400000, AX \
	VMOVD AX, X11 \
	VPBROADCASTD X11, Y11 \
	MOVL $0x3f318000, AX \
	VMOVD AX, X10 \
	VPBROADCASTD X10, Y10 \
	MOVL $0xb95e8083, AX \
	VMOVD AX, X9 \
	VPBROADCASTD X9, Y9 \
	MOVL $127, AX \
	VMOVD AX, X8 \
	VPBROADCASTD X8, Y8

// EXP8(X, E, T1, T2, T3) sets E = e^X on eight lanes, for X in
// (expLo32, expHi32); X and T1-T3 are clobbered. k = round(x log2e) by
// the shifter, r = x - k ln2 in two FMAs (Cody-Waite), e^r - 1 =
// r + r^2 p(r) with p the degree-5 Taylor tail by Horner's rule, and
// e^x = s + s (e^r - 1) with s = 2^k built in the exponent bits.
#define EXP8(X, E, T1, T2, T3) \
	VMOVAPS Y11, T1 \
	VFMADD231PS Y12, X, T1 \
	VSUBPS Y11, T1, T2 \
	VPSUBD Y11, T1, T3 \
	VFNMADD231PS Y10, T2, X \
	VFNMADD231PS Y9, T2, X \
	VMOVUPS expC7<>(SB), E \
	VFMADD213PS expC6<>(SB), X, E \
	VFMADD213PS expC5<>(SB), X, E \
	VFMADD213PS expC4<>(SB), X, E \
	VFMADD213PS expC3<>(SB), X, E \
	VFMADD213PS expC2<>(SB), X, E \
	VMULPS X, X, T2 \
	VFMADD213PS X, T2, E \
	VPADDD Y8, T3, T3 \
	VPSLLD $23, T3, T3 \
	VFMADD213PS T3, T3, E
