# Training: initialisation, the training loop, evaluation, metrics, profiling.
set(GRADC_RUNTIME_TRAIN_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/evaluation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/init.cpp
  ${CMAKE_CURRENT_LIST_DIR}/init_from.cpp
  ${CMAKE_CURRENT_LIST_DIR}/metrics.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op_profile.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cost_probe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/progress.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rank_agreement.cpp
  ${CMAKE_CURRENT_LIST_DIR}/starting_point.cpp
  ${CMAKE_CURRENT_LIST_DIR}/synthetic_inputs.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trainer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/training_data.cpp
)
