# Kernels by family: the portable (ATen) table and the host's own (oneDNN, OpenBLAS, generated code).
set(GRADC_RUNTIME_KERNEL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/attention_composite.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batch_norm_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/blas_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gelu_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/generated_kernels.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_backward.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_batch_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_collective.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_conv_device.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_forward.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_fused.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_fused_loss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_gelu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_layer_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels_transformer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/onednn_conv.cpp
  ${CMAKE_CURRENT_LIST_DIR}/low_precision_products.cpp
  ${CMAKE_CURRENT_LIST_DIR}/widened_products.cpp
  ${CMAKE_CURRENT_LIST_DIR}/row_blocked_products.cpp
  ${CMAKE_CURRENT_LIST_DIR}/row_ops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_products.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tile_products.cpp
)
# The host kernels' vector loops, cloned per instruction set (vector_math.h): without trapping
# math, or the AVX2 clones stay scalar; GELU's also with FMA contraction (gelu_ops.h).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/row_ops.cpp PROPERTIES COMPILE_OPTIONS "-O3;-fno-trapping-math")
# Batch norm's sums are written on GCC's 64-byte vector types (batch_norm_ops.cpp): -Wno-psabi
# silences the note that such values would pass differently between functions built for
# different instruction sets (they never cross one: the helpers are inlined into each clone).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/batch_norm_ops.cpp PROPERTIES COMPILE_OPTIONS
                            "-O3;-fno-trapping-math;-Wno-psabi")
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/gelu_ops.cpp PROPERTIES COMPILE_OPTIONS
                            "-O3;-fno-trapping-math;-ffp-contract=fast")
# The tiled kernels' small products: register-blocked per instruction set, acc += a b as one
# fused multiply-add (tile_products.h).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/tile_products.cpp PROPERTIES COMPILE_OPTIONS "-O3;-ffp-contract=fast")
# The widened products' conversions (bf16/f16 to f32 and back) are plain loops that vectorise
# at -O3 (widened_products.cpp).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/widened_products.cpp PROPERTIES COMPILE_OPTIONS "-O3")
