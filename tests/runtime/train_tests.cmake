gradc_add_test(runtime_train_tests
  runtime/model_parity_test.cpp
  runtime/op_gradient_parity_test.cpp
  runtime/trainer_test.cpp
  runtime/planned_vs_measured_test.cpp
  runtime/remat_equivalence_test.cpp
  runtime/arena_execution_test.cpp
  runtime/fused_loss_test.cpp
  runtime/shared_arena_test.cpp
  LIBS gradc_runtime gradc_frontend gradc_passes gradc_onednn)
