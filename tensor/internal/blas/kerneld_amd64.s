//go:build amd64 && !purego

#include "textflag.h"
#include "tile256_amd64.h"

// func kernel6x16d(k int, a *float32, lda int, b, c *float32, ldc int, alpha, beta float32, load int)
//
// kernel6x16 (kernel_amd64.s) reading A where it lies instead of from a
// packed panel: six rows of a row-major A, lda floats apart, k
// consecutive floats of each (SI walks rows 0-2 as SI, SI+lda, SI+2lda,
// R10 rows 3-5; R11 is lda in bytes). The B panel is packed as for
// kernel6x16. k >= 1.
TEXT ·kernel6x16d(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R11
	SHLQ $2, R11
	LEAQ (SI)(R11*2), R10
	ADDQ R11, R10
	MOVQ b+24(FP), DI
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R8
	SHLQ $2, R8

	TILE_PREFETCH

	TILE_ZERO

#define STEP(aoff, boff) \
	VMOVUPS      boff(DI), Y12;        \
	VMOVUPS      boff+32(DI), Y13;     \
	VBROADCASTSS aoff(SI), Y14;        \
	VBROADCASTSS aoff(SI)(R11*1), Y15;      \
	VFMADD231PS  Y12, Y14, Y0;         \
	VFMADD231PS  Y13, Y14, Y1;         \
	VFMADD231PS  Y12, Y15, Y2;         \
	VFMADD231PS  Y13, Y15, Y3;         \
	VBROADCASTSS aoff(SI)(R11*2), Y14;      \
	VBROADCASTSS aoff(R10), Y15;     \
	VFMADD231PS  Y12, Y14, Y4;         \
	VFMADD231PS  Y13, Y14, Y5;         \
	VFMADD231PS  Y12, Y15, Y6;         \
	VFMADD231PS  Y13, Y15, Y7;         \
	VBROADCASTSS aoff(R10)(R11*1), Y14;     \
	VBROADCASTSS aoff(R10)(R11*2), Y15;     \
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
	STEP(4, 64)
	PREFETCHT0 448(DI)
	STEP(8, 128)
	STEP(12, 192)
	ADDQ $16, SI
	ADDQ $16, R10
	ADDQ $256, DI
	DECQ BX
	JNZ  loop4

tail:
	TESTQ CX, CX
	JZ    store

loop1:
	STEP(0, 0)
	ADDQ $4, SI
	ADDQ $4, R10
	ADDQ $64, DI
	DECQ CX
	JNZ  loop1

store:
	VBROADCASTSS alpha+48(FP), Y14
	TILE_SCALE

	MOVQ load+56(FP), AX
	TESTQ AX, AX
	JZ   overwrite

	VBROADCASTSS beta+52(FP), Y15
	TILE_ACCUM
	VZEROUPPER
	RET

overwrite:
	TILE_PUT
	VZEROUPPER
	RET
