//go:build amd64 && !purego

#include "textflag.h"
#include "tile512_amd64.h"

// func kernel6x32(k int, a, b, c *float32, ldc int, alpha, beta float32, load int)
//
// kernel6x16 (kernel_amd64.s) in AVX-512: the tile is 6×32, two ZMM
// registers a row in Z0-Z11, a row of Bp (32 floats, 128 bytes a step)
// in Z12, Z13, the broadcast elements of Ap in Z14, Z15. k >= 1.
TEXT ·kernel6x32(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8

	TILE_PREFETCH

	TILE_ZERO

#define STEP(aoff, boff) \
	VMOVUPS      boff(DI), Z12;        \
	VMOVUPS      boff+64(DI), Z13;     \
	VBROADCASTSS aoff(SI), Z14;        \
	VBROADCASTSS aoff+4(SI), Z15;      \
	VFMADD231PS  Z12, Z14, Z0;         \
	VFMADD231PS  Z13, Z14, Z1;         \
	VFMADD231PS  Z12, Z15, Z2;         \
	VFMADD231PS  Z13, Z15, Z3;         \
	VBROADCASTSS aoff+8(SI), Z14;      \
	VBROADCASTSS aoff+12(SI), Z15;     \
	VFMADD231PS  Z12, Z14, Z4;         \
	VFMADD231PS  Z13, Z14, Z5;         \
	VFMADD231PS  Z12, Z15, Z6;         \
	VFMADD231PS  Z13, Z15, Z7;         \
	VBROADCASTSS aoff+16(SI), Z14;     \
	VBROADCASTSS aoff+20(SI), Z15;     \
	VFMADD231PS  Z12, Z14, Z8;         \
	VFMADD231PS  Z13, Z14, Z9;         \
	VFMADD231PS  Z12, Z15, Z10;        \
	VFMADD231PS  Z13, Z15, Z11

	// Four steps a turn, then the remainder one at a time.
	MOVQ CX, BX
	SHRQ $2, BX
	ANDQ $3, CX
	TESTQ BX, BX
	JZ   tail

loop4:
	PREFETCHT0 768(DI)
	PREFETCHT0 832(DI)
	STEP(0, 0)
	STEP(24, 128)
	PREFETCHT0 896(DI)
	PREFETCHT0 960(DI)
	STEP(48, 256)
	STEP(72, 384)
	ADDQ $96, SI
	ADDQ $512, DI
	DECQ BX
	JNZ  loop4

tail:
	TESTQ CX, CX
	JZ    store

loop1:
	STEP(0, 0)
	ADDQ $24, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop1

store:
	VBROADCASTSS alpha+40(FP), Z14
	TILE_SCALE

	MOVQ load+48(FP), AX
	TESTQ AX, AX
	JZ   overwrite

	VBROADCASTSS beta+44(FP), Z15
	TILE_ACCUM
	VZEROUPPER
	RET

overwrite:
	TILE_PUT
	VZEROUPPER
	RET
