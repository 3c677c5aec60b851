#include "sightline/kernels/axpy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sightline::kernels {
namespace {

TEST(Axpy, CpuReference) {
  std::vector<float> x = {1, 2, 3}, y = {10, 20, 30};
  AxpyCpu(2.0f, x.data(), y.data(), x.size());
  EXPECT_EQ(y, (std::vector<float>{12, 24, 36}));
}

TEST(Axpy, CudaMatchesCpu) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
  const std::size_t n = 100003;  // not a multiple of the block size
  std::vector<float> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 97) * 0.5f;
    y[i] = static_cast<float>(i % 13);
  }
  std::vector<float> expect = y;
  AxpyCpu(3.0f, x.data(), expect.data(), n);
  std::string error;
  ASSERT_TRUE(AxpyCuda(3.0f, x.data(), y.data(), n, &error)) << error;
  EXPECT_EQ(y, expect);  // a*x+y with small integers and halves is exact in fp32
}

TEST(Axpy, CudaReportsUnavailability) {
  if (CudaAvailable()) GTEST_SKIP() << "a CUDA device is present";
  std::vector<float> x = {1}, y = {1};
  std::string error;
  EXPECT_FALSE(AxpyCuda(1.0f, x.data(), y.data(), 1, &error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace sightline::kernels
