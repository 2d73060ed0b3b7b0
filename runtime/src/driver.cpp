int sparsecc_runtime_placeholder() { return 0; }
