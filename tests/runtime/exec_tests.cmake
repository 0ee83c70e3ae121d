# Executor, kernels (parity against LibTorch), counter-based RNG, memory tracking.
gradc_add_test(runtime_exec_tests
  runtime/kernels_test.cpp
  runtime/kernels_backward_test.cpp
  runtime/kernels_optimizer_test.cpp
  runtime/batch_norm_test.cpp
  runtime/executor_test.cpp
  runtime/counter_rng_test.cpp
  runtime/device_paths_test.cpp
  runtime/memory_tracker_test.cpp
  runtime/blas_kernels_test.cpp
  runtime/low_precision_products_test.cpp
  runtime/widened_products_test.cpp
  runtime/conv_low_precision_test.cpp
  runtime/onednn_conv_test.cpp
  runtime/attention_test.cpp
  runtime/attention_composite_test.cpp
  runtime/tile_products_test.cpp
  runtime/host_products_test.cpp
  LIBS gradc_runtime gradc_onednn)
