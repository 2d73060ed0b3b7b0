// `sparsecc_bench hines ...`: sparsecc's Hines executors against the Hines baselines, same run, same
// GPU (see hines_bench.cpp for the options).
#pragma once

namespace sparsecc::bench {

// argv[0] is "hines". Returns the exit status: 0, 1 when a check fails, 2 for bad input.
int hines_bench_main(int argc, char** argv);

}  // namespace sparsecc::bench
