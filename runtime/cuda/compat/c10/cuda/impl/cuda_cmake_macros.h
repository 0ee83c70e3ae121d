// Stand-in for the header a CUDA build of LibTorch generates and Debian's CPU-only package
// lacks: it lets the CUDA sources of the runtime compile (not link) against the CPU LibTorch's
// c10/cuda headers, so CI catches their errors. Builds against a CUDA LibTorch use the real one.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
