// Runtime behaviour that needs no GPU: the driver is opened lazily, and when it is missing the
// runtime says why instead of failing to start.
#include <gtest/gtest.h>

#include "sparsecc/runtime/driver.hpp"

TEST(Runtime, DriverAvailabilityIsReportedNotFatal) {
  std::string why;
  const bool ok = sparsecc::rt::driver_available(&why);
  if (ok) {
    EXPECT_TRUE(why.empty());
    EXPECT_GT(sparsecc::rt::driver().version, 0);
  } else {
    EXPECT_FALSE(why.empty());
    EXPECT_THROW(sparsecc::rt::driver(), sparsecc::rt::DriverUnavailable);
  }
}
