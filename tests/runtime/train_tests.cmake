# gradc_add_test(runtime_train_tests ... LIBS gradc_runtime) once this area has tests.
