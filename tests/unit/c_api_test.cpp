// The runtime's C API without a GPU: statuses, the thread-local last error, and argument checks.
// A valid bundle reports SPARSECC_NO_DEVICE when the driver is missing; bad bundles report
// SPARSECC_BAD_BUNDLE before any device is touched.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "sparsecc/runtime/bundle.hpp"
#include "sparsecc/runtime/driver.hpp"
#include "sparsecc/runtime/sparsecc_runtime.h"
#include "test_support.hpp"

namespace {

std::vector<unsigned char> valid_bytes() {
  sparsecc::rt::Bundle b;
  b.metadata.m = 2;
  b.metadata.k = 2;
  b.metadata.n = 4;
  b.metadata.nnz = 3;
  b.metadata.kernel = "k";
  b.metadata.fingerprint = "ab";
  b.ptx = ".version 8.0\n";
  return sparsecc::rt::bundle_bytes(b);
}

bool contains(const char* haystack, const std::string& needle) {
  return std::string(haystack).find(needle) != std::string::npos;
}

}  // namespace

TEST(CApi, BadBundlesAreReportedWithTheReason) {
  sparsecc_executor* ex = reinterpret_cast<sparsecc_executor*>(1);
  EXPECT_EQ(sparsecc_executor_load_file("/nonexistent/x.spcc", 0, &ex), SPARSECC_BAD_BUNDLE);
  EXPECT_EQ(ex, nullptr);
  EXPECT_TRUE(contains(sparsecc_last_error(), "/nonexistent/x.spcc: cannot open")) << sparsecc_last_error();

  const char junk[] = "definitely not a bundle, but longer than a header";
  EXPECT_EQ(sparsecc_executor_load_bytes(junk, sizeof junk, 0, &ex), SPARSECC_BAD_BUNDLE);
  EXPECT_TRUE(contains(sparsecc_last_error(), "byte 0: not a sparsecc bundle")) << sparsecc_last_error();

  auto bytes = valid_bytes();
  bytes[8] = 7;
  EXPECT_EQ(sparsecc_executor_load_bytes(bytes.data(), bytes.size(), 0, &ex), SPARSECC_BAD_BUNDLE);
  EXPECT_TRUE(contains(sparsecc_last_error(), "version 7 is newer")) << sparsecc_last_error();

  sparsecc::test::TempDir dir;
  bytes = valid_bytes();
  bytes.pop_back();
  sparsecc::test::write_bytes(dir.file("cut.spcc"), bytes);
  EXPECT_EQ(sparsecc_executor_load_file(dir.file("cut.spcc").c_str(), 0, &ex), SPARSECC_BAD_BUNDLE);
  EXPECT_TRUE(contains(sparsecc_last_error(), "cut.spcc: byte 16")) << sparsecc_last_error();
}

TEST(CApi, ValidBundleWithoutDeviceIsNoDevice) {
  const auto bytes = valid_bytes();
  sparsecc_executor* ex = nullptr;
  std::string why;
  if (sparsecc::rt::driver_available(&why)) {
    EXPECT_EQ(sparsecc_executor_load_bytes(bytes.data(), bytes.size(), 4096, &ex), SPARSECC_NO_DEVICE);
    EXPECT_TRUE(contains(sparsecc_last_error(), "no CUDA device 4096")) << sparsecc_last_error();
  } else {
    EXPECT_EQ(sparsecc_executor_load_bytes(bytes.data(), bytes.size(), 0, &ex), SPARSECC_NO_DEVICE);
    EXPECT_EQ(std::string(sparsecc_last_error()), why);
  }
  EXPECT_EQ(ex, nullptr);
}

TEST(CApi, ArgumentsAreChecked) {
  sparsecc_executor* ex = nullptr;
  EXPECT_EQ(sparsecc_executor_load_file(nullptr, 0, &ex), SPARSECC_BAD_ARGUMENT);
  EXPECT_TRUE(contains(sparsecc_last_error(), "path must not be null"));
  EXPECT_EQ(sparsecc_executor_load_file("x.spcc", 0, nullptr), SPARSECC_BAD_ARGUMENT);
  EXPECT_TRUE(contains(sparsecc_last_error(), "out must not be null"));
  EXPECT_EQ(sparsecc_executor_load_bytes(nullptr, 10, 0, &ex), SPARSECC_BAD_ARGUMENT);
  EXPECT_EQ(sparsecc_executor_load_file("x.spcc", -1, &ex), SPARSECC_BAD_ARGUMENT);
  EXPECT_EQ(sparsecc_executor_run(nullptr, 0, 0, 1, nullptr), SPARSECC_BAD_ARGUMENT);
  EXPECT_TRUE(contains(sparsecc_last_error(), "executor must not be null"));
  EXPECT_STREQ(sparsecc_executor_metadata_json(nullptr), "");
  sparsecc_executor_destroy(nullptr);
}

TEST(CApi, LastErrorIsPerThread) {
  sparsecc_executor* ex = nullptr;
  EXPECT_EQ(sparsecc_executor_load_file(nullptr, 0, &ex), SPARSECC_BAD_ARGUMENT);
  std::string other;
  std::thread([&] {
    other = sparsecc_last_error();
    sparsecc_executor_load_file("/nonexistent/y.spcc", 0, &ex);
  }).join();
  EXPECT_EQ(other, "");
  EXPECT_TRUE(contains(sparsecc_last_error(), "path must not be null")) << sparsecc_last_error();
}
