// The flatc-generated code is wired in and the verifier guards decoding.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sightline/ipc/handshake_generated.h"

namespace sightline::ipc {
namespace {

std::vector<uint8_t> BuildReady() {
  flatbuffers::FlatBufferBuilder b;
  auto name = b.CreateString("tiny-llama");
  auto eos = b.CreateVector(std::vector<int32_t>{2, 7});
  b.Finish(CreateEngineReady(b, 0, name, 1024, 16, 512, 8192, 32000, eos));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

TEST(Handshake, RoundTrip) {
  const auto buf = BuildReady();
  flatbuffers::Verifier v(buf.data(), buf.size());
  ASSERT_TRUE(VerifyEngineReadyBuffer(v));
  const EngineReady* r = GetEngineReady(buf.data());
  EXPECT_EQ(r->model_name()->str(), "tiny-llama");
  EXPECT_EQ(r->max_model_len(), 1024u);
  EXPECT_EQ(r->block_size(), 16u);
  EXPECT_EQ(r->num_gpu_blocks(), 512u);
  ASSERT_EQ(r->eos_token_ids()->size(), 2u);
  EXPECT_EQ(r->eos_token_ids()->Get(1), 7);
}

// Verifies a buffer; when accepted, reads every field (must be memory-safe,
// which ASan/valgrind runs of this test would flag otherwise).
bool VerifyAndRead(const std::vector<uint8_t>& buf, std::size_t len) {
  flatbuffers::Verifier v(buf.data(), len);
  if (!VerifyEngineReadyBuffer(v)) return false;
  const EngineReady* r = GetEngineReady(buf.data());
  if (r->model_name()) (void)r->model_name()->str();
  if (r->eos_token_ids())
    for (auto id : *r->eos_token_ids()) (void)id;
  return true;
}

TEST(Handshake, VerifierRejectsTruncatedAndCorruptBuffers) {
  const auto good = BuildReady();
  // Anything cut into the table's data is rejected (only trailing alignment
  // padding may go).
  for (std::size_t len = 0; len + 8 < good.size(); ++len)
    EXPECT_FALSE(VerifyAndRead(good, len)) << "truncated to " << len;
  std::mt19937 rng(7);
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> bad = good;
    bad[rng() % bad.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    rejected += !VerifyAndRead(bad, bad.size());
  }
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace sightline::ipc
