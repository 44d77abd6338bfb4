//go:build amd64 && !purego

#include "textflag.h"

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

	MOVQ load+48(FP), AX
	TESTQ AX, AX
	JZ   overwrite

#define ACCUM(r0, r1) \
	VFMADD231PS (DX), Y15, r0;   \
	VFMADD231PS 32(DX), Y15, r1; \
	VMOVUPS     r0, (DX);        \
	VMOVUPS     r1, 32(DX);      \
	ADDQ        R8, DX

	VBROADCASTSS beta+44(FP), Y15
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
