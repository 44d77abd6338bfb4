#!/bin/sh
# Checks kernels on the CPU, without a GPU: compiles them as host C++ over
# emu.h (g++ 12+; the CUDA headers for the vector and half types, Debian's
# nvidia-cuda-dev, where installed, else the stand-ins of stub/) and runs a
# test against float64 references.
#   run.sh [quick|mma|mma3|tf32|x3]  kernels/attention.cuh (attention_test.cpp,
#                            about 5 minutes): `quick` one head size of the
#                            float32-math kernels, `mma` (or `mma3`) only
#                            the tensor-core kernels of attention_mma3.cuh,
#                            `tf32` only their float32 (TF32) ones
#   run.sh rows              the row kernels: layernorm.cuh (forward and
#                            backward, both paths) and the fused
#                            cross-entropy
#                            (rows_test.cpp, seconds)
set -e
cd "$(dirname "$0")"
if [ "$1" = rows ]; then
  g++ -std=c++20 -O2 -pthread -Wno-unknown-pragmas -w -idirafter stub -o /tmp/strata-rows-emu rows_test.cpp
  exec /tmp/strata-rows-emu
fi
g++ -std=c++20 -O2 -pthread -Wno-unknown-pragmas -idirafter stub -o /tmp/strata-attention-emu attention_test.cpp
exec /tmp/strata-attention-emu "$@"
