// ATen's CPU layer-norm kernels (the dispatch stubs at::native_layer_norm and its backward run),
// for kernels that write into planned buffers: the functional ATen ops only allocate their
// results, and their `_out` variants compute into a temporary and copy.
//
// The stubs' call ABI depends on which CPU variants the library was built with: Debian's
// LibTorch (x86-64) has AVX2 and AVX-512 kernels (libtorch_cpu exports DispatchStub<...>::AVX2
// and ::AVX512, and DispatchStubImpl::get_call_ptr takes both), so both are declared here.
#pragma once

#if defined(__x86_64__)
#ifndef HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX512_CPU_DEFINITION
#endif
#ifndef HAVE_AVX2_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#endif
#endif
#include <ATen/native/layer_norm.h>

