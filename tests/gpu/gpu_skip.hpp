// GPU tests skip, with the reason, when no CUDA driver or device is present (CI has none).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "sparsecc/runtime/driver.hpp"

#define SPARSECC_GPU_OR_SKIP()                                                                    \
  do {                                                                                            \
    std::string why_no_gpu;                                                                       \
    if (!::sparsecc::rt::driver_available(&why_no_gpu)) GTEST_SKIP() << "no GPU: " << why_no_gpu; \
  } while (0)
