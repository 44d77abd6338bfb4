//go:build amd64 && !purego

#include "textflag.h"
#include "tile256_amd64.h"

// func kernel6x16(k int, a, b, c *float32, ldc int, alpha, beta float32, load int)
//
// C[0:6, 0:16] = alpha * Ap·Bp + beta*C (C read only when load != 0) for
// packed panels: Ap holds k steps of 6 floats (one column of the A
// panel), Bp k steps of 16 (one row of the B panel). The 6×16 tile
// lives in Y0-Y11 (two registers a row); Y12, Y13 hold a row of Bp and
// Y14, Y15 the broadcast elements of Ap. k >= 1.
TEXT ·kernel6x16(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8

	TILE_PREFETCH

	TILE_ZERO

#define STEP(aoff, boff) \
	VMOVUPS      boff(DI), Y12;        \
	VMOVUPS      boff+32(DI), Y13;     \
	VBROADCASTSS aoff(SI), Y14;        \
	VBROADCASTSS aoff+4(SI), Y15;      \
	VFMADD231PS  Y12, Y14, Y0;         \
	VFMADD231PS  Y13, Y14, Y1;         \
	VFMADD231PS  Y12, Y15, Y2;         \
	VFMADD231PS  Y13, Y15, Y3;         \
	VBROADCASTSS aoff+8(SI), Y14;      \
	VBROADCASTSS aoff+12(SI), Y15;     \
	VFMADD231PS  Y12, Y14, Y4;         \
	VFMADD231PS  Y13, Y14, Y5;         \
	VFMADD231PS  Y12, Y15, Y6;         \
	VFMADD231PS  Y13, Y15, Y7;         \
	VBROADCASTSS aoff+16(SI), Y14;     \
	VBROADCASTSS aoff+20(SI), Y15;     \
	VFMADD231PS  Y12, Y14, Y8;         \
	VFMADD231PS  Y13, Y14, Y9;         \
	VFMADD231PS  Y12, Y15, Y10;        \
	VFMADD231PS  Y13, Y15, Y11

	// Four steps a turn, then the remainder one at a time.
	MOVQ CX, BX
	SHRQ $2, BX
	ANDQ $3, CX
	TESTQ BX, BX
	JZ   tail

loop4:
	PREFETCHT0 384(DI)
	STEP(0, 0)
	STEP(24, 64)
	PREFETCHT0 448(DI)
	STEP(48, 128)
	STEP(72, 192)
	ADDQ $96, SI
	ADDQ $256, DI
	DECQ BX
	JNZ  loop4

tail:
	TESTQ CX, CX
	JZ    store

loop1:
	STEP(0, 0)
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop1

store:
	VBROADCASTSS alpha+40(FP), Y14
	TILE_SCALE

	MOVQ load+48(FP), AX
	TESTQ AX, AX
	JZ   overwrite

	VBROADCASTSS beta+44(FP), Y15
	TILE_ACCUM
	VZEROUPPER
	RET

overwrite:
	TILE_PUT
	VZEROUPPER
	RET
