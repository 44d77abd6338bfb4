// Macros shared by the AVX2 6×16 micro-kernels (packed and direct A): the
// tile of C lives in Y0-Y11, two registers a row; DX points at C's first
// row, R8 is ldc in bytes.

// TILE_PREFETCH touches the tile's rows (R9 walks them) so that the
// stores at the end find them in cache.
#define TILE_PREFETCH \
	MOVQ       DX, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 60(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 60(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 60(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 60(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 60(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 60(R9)

// TILE_ZERO clears the accumulators.
#define TILE_ZERO \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11

// TILE_SCALE multiplies the accumulators by alpha, broadcast in Y14.
#define TILE_SCALE \
	VMULPS Y14, Y0, Y0; \
	VMULPS Y14, Y1, Y1; \
	VMULPS Y14, Y2, Y2; \
	VMULPS Y14, Y3, Y3; \
	VMULPS Y14, Y4, Y4; \
	VMULPS Y14, Y5, Y5; \
	VMULPS Y14, Y6, Y6; \
	VMULPS Y14, Y7, Y7; \
	VMULPS Y14, Y8, Y8; \
	VMULPS Y14, Y9, Y9; \
	VMULPS Y14, Y10, Y10; \
	VMULPS Y14, Y11, Y11

// TILE_ACCUM stores beta*C + the accumulators into C, beta broadcast in
// Y15 (DX ends past the tile).
#define TILE_ACCUM \
	VFMADD231PS (DX), Y15, Y0;   \
	VFMADD231PS 32(DX), Y15, Y1; \
	VMOVUPS     Y0, (DX);        \
	VMOVUPS     Y1, 32(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Y15, Y2;   \
	VFMADD231PS 32(DX), Y15, Y3; \
	VMOVUPS     Y2, (DX);        \
	VMOVUPS     Y3, 32(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Y15, Y4;   \
	VFMADD231PS 32(DX), Y15, Y5; \
	VMOVUPS     Y4, (DX);        \
	VMOVUPS     Y5, 32(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Y15, Y6;   \
	VFMADD231PS 32(DX), Y15, Y7; \
	VMOVUPS     Y6, (DX);        \
	VMOVUPS     Y7, 32(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Y15, Y8;   \
	VFMADD231PS 32(DX), Y15, Y9; \
	VMOVUPS     Y8, (DX);        \
	VMOVUPS     Y9, 32(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Y15, Y10;   \
	VFMADD231PS 32(DX), Y15, Y11; \
	VMOVUPS     Y10, (DX);        \
	VMOVUPS     Y11, 32(DX);      \
	ADDQ        R8, DX

// TILE_PUT stores the accumulators into C, not reading it.
#define TILE_PUT \
	VMOVUPS Y0, (DX);   \
	VMOVUPS Y1, 32(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Y2, (DX);   \
	VMOVUPS Y3, 32(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Y4, (DX);   \
	VMOVUPS Y5, 32(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Y6, (DX);   \
	VMOVUPS Y7, 32(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Y8, (DX);   \
	VMOVUPS Y9, 32(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Y10, (DX);   \
	VMOVUPS Y11, 32(DX); \
	ADDQ    R8, DX
