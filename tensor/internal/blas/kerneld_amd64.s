//go:build amd64 && !purego

#include "textflag.h"

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

	// Touch the tile's rows so that the stores at the end find them in cache.
	MOVQ      DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ      R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ      R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ      R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ      R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)
	ADDQ      R8, R9
	PREFETCHT0 (R9)
	PREFETCHT0 60(R9)

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

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
	VMULPS       Y14, Y0, Y0
	VMULPS       Y14, Y1, Y1
	VMULPS       Y14, Y2, Y2
	VMULPS       Y14, Y3, Y3
	VMULPS       Y14, Y4, Y4
	VMULPS       Y14, Y5, Y5
	VMULPS       Y14, Y6, Y6
	VMULPS       Y14, Y7, Y7
	VMULPS       Y14, Y8, Y8
	VMULPS       Y14, Y9, Y9
	VMULPS       Y14, Y10, Y10
	VMULPS       Y14, Y11, Y11

	MOVQ load+56(FP), AX
	TESTQ AX, AX
	JZ   overwrite

#define ACCUM(r0, r1) \
	VFMADD231PS (DX), Y15, r0;   \
	VFMADD231PS 32(DX), Y15, r1; \
	VMOVUPS     r0, (DX);        \
	VMOVUPS     r1, 32(DX);      \
	ADDQ        R8, DX

	VBROADCASTSS beta+52(FP), Y15
	ACCUM(Y0, Y1)
	ACCUM(Y2, Y3)
	ACCUM(Y4, Y5)
	ACCUM(Y6, Y7)
	ACCUM(Y8, Y9)
	ACCUM(Y10, Y11)
	VZEROUPPER
	RET

#define PUT(r0, r1) \
	VMOVUPS r0, (DX);   \
	VMOVUPS r1, 32(DX); \
	ADDQ    R8, DX

overwrite:
	PUT(Y0, Y1)
	PUT(Y2, Y3)
	PUT(Y4, Y5)
	PUT(Y6, Y7)
	PUT(Y8, Y9)
	PUT(Y10, Y11)
	VZEROUPPER
	RET
