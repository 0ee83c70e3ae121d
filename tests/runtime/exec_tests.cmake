# gradc_add_test(runtime_exec_tests ... LIBS gradc_runtime) once this area has tests.
