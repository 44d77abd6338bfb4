// Stand-ins for the CUDA headers the emulator needs (see ../emu.h), for
// machines without them: run.sh puts this folder after the system's
// include path (-idirafter), so the real headers win where installed.
#pragma once
struct alignas(8) uint2 { unsigned int x, y; };
struct alignas(16) uint4 { unsigned int x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
