// Macros shared by the AVX-512 6×32 micro-kernels (packed and direct A): the
// tile of C lives in Z0-Z11, two registers a row; DX points at C's first
// row, R8 is ldc in bytes.

// TILE_PREFETCH touches the tile's rows (R9 walks them) so that the
// stores at the end find them in cache.
#define TILE_PREFETCH \
	MOVQ       DX, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 124(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 124(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 124(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 124(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 124(R9);       \
	ADDQ       R8, R9;       \
	PREFETCHT0 (R9);         \
	PREFETCHT0 124(R9)

// TILE_ZERO clears the accumulators.
#define TILE_ZERO \
	VPXORD Z0, Z0, Z0; \
	VPXORD Z1, Z1, Z1; \
	VPXORD Z2, Z2, Z2; \
	VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; \
	VPXORD Z5, Z5, Z5; \
	VPXORD Z6, Z6, Z6; \
	VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; \
	VPXORD Z9, Z9, Z9; \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11

// TILE_SCALE multiplies the accumulators by alpha, broadcast in Z14.
#define TILE_SCALE \
	VMULPS Z14, Z0, Z0; \
	VMULPS Z14, Z1, Z1; \
	VMULPS Z14, Z2, Z2; \
	VMULPS Z14, Z3, Z3; \
	VMULPS Z14, Z4, Z4; \
	VMULPS Z14, Z5, Z5; \
	VMULPS Z14, Z6, Z6; \
	VMULPS Z14, Z7, Z7; \
	VMULPS Z14, Z8, Z8; \
	VMULPS Z14, Z9, Z9; \
	VMULPS Z14, Z10, Z10; \
	VMULPS Z14, Z11, Z11

// TILE_ACCUM stores beta*C + the accumulators into C, beta broadcast in
// Z15 (DX ends past the tile).
#define TILE_ACCUM \
	VFMADD231PS (DX), Z15, Z0;   \
	VFMADD231PS 64(DX), Z15, Z1; \
	VMOVUPS     Z0, (DX);        \
	VMOVUPS     Z1, 64(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Z15, Z2;   \
	VFMADD231PS 64(DX), Z15, Z3; \
	VMOVUPS     Z2, (DX);        \
	VMOVUPS     Z3, 64(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Z15, Z4;   \
	VFMADD231PS 64(DX), Z15, Z5; \
	VMOVUPS     Z4, (DX);        \
	VMOVUPS     Z5, 64(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Z15, Z6;   \
	VFMADD231PS 64(DX), Z15, Z7; \
	VMOVUPS     Z6, (DX);        \
	VMOVUPS     Z7, 64(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Z15, Z8;   \
	VFMADD231PS 64(DX), Z15, Z9; \
	VMOVUPS     Z8, (DX);        \
	VMOVUPS     Z9, 64(DX);      \
	ADDQ        R8, DX; \
	VFMADD231PS (DX), Z15, Z10;   \
	VFMADD231PS 64(DX), Z15, Z11; \
	VMOVUPS     Z10, (DX);        \
	VMOVUPS     Z11, 64(DX);      \
	ADDQ        R8, DX

// TILE_PUT stores the accumulators into C, not reading it.
#define TILE_PUT \
	VMOVUPS Z0, (DX);   \
	VMOVUPS Z1, 64(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Z2, (DX);   \
	VMOVUPS Z3, 64(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Z4, (DX);   \
	VMOVUPS Z5, 64(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Z6, (DX);   \
	VMOVUPS Z7, 64(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Z8, (DX);   \
	VMOVUPS Z9, 64(DX); \
	ADDQ    R8, DX; \
	VMOVUPS Z10, (DX);   \
	VMOVUPS Z11, 64(DX); \
	ADDQ    R8, DX
