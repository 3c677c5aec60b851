// The sampling conversions carry every field of engine.fbs's SamplingParams
// both ways, and a message without the table reads as the defaults.
#include <gtest/gtest.h>

#include "sightline/ipc/codec.h"
#include "sightline/ipc/sampling.h"

namespace sightline::ipc {
namespace {

// Every field off its default, so a field either conversion dropped would
// come back as the default and differ.
SamplingParamsT NonDefault() {
  SamplingParamsT p;
  p.temperature = 0.5f;
  p.top_p = 0.9f;
  p.top_k = 7;
  p.min_p = 0.05f;
  p.seed = 99;
  p.has_seed = true;
  p.max_tokens = 3;
  p.max_tokens_set = true;
  p.min_tokens = 2;
  p.stop_token_ids = {5, 6};
  p.ignore_eos = true;
  p.n = 4;
  p.repetition_penalty = 1.2f;
  p.presence_penalty = 0.3f;
  p.frequency_penalty = -0.4f;
  return p;
}

const SamplingParams* Sealed(flatbuffers::FlatBufferBuilder& b, const SamplingParamsT& p) {
  const auto sampling = ToWire(b, p);
  const auto id = b.CreateString("r");
  const auto prompt = b.CreateVector(std::vector<std::int32_t>{1});
  AddRequestBuilder r(b);
  r.add_request_id(id);
  r.add_prompt_token_ids(prompt);
  if (!sampling.IsNull()) r.add_sampling(sampling);
  const auto bytes = Seal(b, Body::AddRequest, r.Finish().Union());
  const Envelope* e = Decode(bytes);
  return e ? e->body_as_AddRequest()->sampling() : nullptr;
}

TEST(SamplingWire, EveryFieldRoundTrips) {
  SamplingParamsT p = NonDefault();
  EXPECT_FALSE(p == SamplingParamsT());
  flatbuffers::FlatBufferBuilder b;
  const SamplingParams* s = Sealed(b, p);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(FromWire(s) == p);
}

TEST(SamplingWire, DefaultsRoundTrip) {
  flatbuffers::FlatBufferBuilder b;
  const SamplingParams* s = Sealed(b, SamplingParamsT());
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(FromWire(s) == SamplingParamsT());
}

TEST(SamplingWire, AMissingTableReadsAsTheDefaults) {
  EXPECT_TRUE(FromWire(nullptr) == SamplingParamsT());
  EXPECT_EQ(FromWire(nullptr).max_tokens, 16u);
  EXPECT_EQ(FromWire(nullptr).temperature, 1.0f);
}

}  // namespace
}  // namespace sightline::ipc
