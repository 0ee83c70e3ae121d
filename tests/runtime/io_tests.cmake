# gradc_add_test(runtime_io_tests ... LIBS gradc_runtime) once this area has tests.
