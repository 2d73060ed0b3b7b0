// `sparsecc_bench blocklets ...`: sparsecc's fp16 / bf16 executors, with blocklets automatic and off,
// against cuBLAS fp16 / bf16 and cuSPARSE CSR and Blocked-ELL in the same precision, same run, same
// GPU (see blocklet_bench.cpp for the suites and options).
#pragma once

namespace sparsecc::bench {

// argv[0] is "blocklets". Returns the exit status: 0, 1 when a check fails, 2 for bad input.
int blocklet_bench_main(int argc, char** argv);

}  // namespace sparsecc::bench
