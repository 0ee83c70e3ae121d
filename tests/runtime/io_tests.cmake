# Safetensors, training data and checkpoints (runtime/safetensors, data, checkpoint, atomic_file).
gradc_add_test(runtime_io_tests
  runtime/safetensors_test.cpp
  runtime/data_test.cpp
  runtime/data_mapping_test.cpp
  runtime/image_data_test.cpp
  runtime/checkpoint_test.cpp
  runtime/json_text_test.cpp
  runtime/plan_codec_test.cpp
  runtime/kernel_trust_test.cpp
  LIBS gradc_runtime)
