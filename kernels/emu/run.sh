#!/bin/sh
# Checks kernels/attention.cuh on the CPU, without a GPU: compiles it as
# host C++ over emu.h (g++ 12+, the CUDA headers for the half types) and
# runs attention_test.cpp (about 5 minutes). `run.sh quick` runs one head
# size of the float32-math kernels, `run.sh mma` (or `mma3`) only the
# tensor-core kernels of attention_mma3.cuh (mma3 and mma3drop).
set -e
cd "$(dirname "$0")"
g++ -std=c++20 -O2 -pthread -Wno-unknown-pragmas -o /tmp/strata-attention-emu attention_test.cpp
exec /tmp/strata-attention-emu "$@"
