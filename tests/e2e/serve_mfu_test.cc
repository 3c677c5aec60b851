// `sightline serve --enable-mfu-metrics` end to end: vLLM's three MFU
// counters exist at 0 before any request, grow with the work by at least the
// GEMMs' FLOPs and the weights read once per step (and not wildly more), and
// the engine's stats line is followed by its MFU line. The exact per-step
// arithmetic is engine_core's (perf_estimate_test, engine_process_test).
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <thread>

#include "e2e/load.h"
#include "e2e/serve_instance.h"

namespace sightline::testing {
namespace {

using namespace std::chrono_literals;

const std::string kFlops = Key("vllm:estimated_flops_per_gpu_total");
const std::string kRead = Key("vllm:estimated_read_bytes_per_gpu_total");
const std::string kWrite = Key("vllm:estimated_write_bytes_per_gpu_total");

TEST(ServeMfu, CountersGrowWithTheWorkAndTheStatsLineShowsMfu) {
  // No prefix caching, one request at a time: every prompt token is computed
  // and every step holds one request.
  ServeInstance serve(
      {"--enable-mfu-metrics", "--no-enable-prefix-caching", "--log-stats-interval", "0.2"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  auto before = Scrape(serve.port());
  for (const std::string& k : {kFlops, kRead, kWrite}) {
    ASSERT_EQ(before.count(k), 1u) << k;
    EXPECT_EQ(before[k], 0) << k;
  }
  constexpr int kRequests = 3, kMax = 8;
  for (int i = 0; i < kRequests; ++i) {
    const Outcome o = Complete(serve.port(), 64, kMax, i % 2 == 0);
    ASSERT_TRUE(o.ok) << o.failure;
  }
  auto p = Scrape(serve.port());
  const double prompt = p[Key("vllm:prompt_tokens_total")];
  ASSERT_GE(prompt, kRequests * 64);
  // Positions computed: every prompt token, and each generated token but the
  // last of each request (it is sampled, never fed back).
  const double computed = prompt + kRequests * (kMax - 1);
  const double steps = kRequests * kMax;  // one prefill and 7 decodes each
  // sightline-tiny: per layer q,k,v 64*(64+2*32), o 64*64, gate/up/down
  // 3*64*176 matrix entries; 2 layers; an LM head of 64*260; all FP32.
  const double layer_params = 64.0 * 128 + 64 * 64 + 3 * 64 * 176;
  const double gemm_flops = 2 * (2 * layer_params * computed + 64.0 * 260 * kRequests * kMax);
  EXPECT_GE(p[kFlops], gemm_flops);
  // Attention adds at most 4*(q width 64)*layers*context per position.
  EXPECT_LE(p[kFlops], gemm_flops + 4 * 64 * 2 * computed * (prompt / kRequests + kMax));
  EXPECT_GE(p[kRead], steps * 4 * (2 * layer_params + 64 * 260));  // every weight, every step
  EXPECT_LE(p[kRead], 4 * p[kFlops]);                              // not absurdly more
  EXPECT_GE(p[kWrite], computed * 2 * 32 * 2 * 4);                 // at least the new K and V, FP32

  // The MFU line follows the engine's stats line within a few intervals.
  const std::regex mfu(R"(Engine 000: MFU: [0-9]+\.[0-9] TF/s/GPU [0-9]+\.[0-9] GB/s/GPU)");
  bool logged = false;
  for (int i = 0; i < 50 && !logged; ++i) {
    logged = std::regex_search(serve.Log(), mfu);
    if (!logged) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(logged) << serve.Log();
}

}  // namespace
}  // namespace sightline::testing
