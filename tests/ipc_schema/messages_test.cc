// Every message kind round-trips, and no malformed buffer gets past Decode:
// truncations, bit flips and random bytes are rejected or read safely in full.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ipc_schema/read_all.h"
#include "sightline/ipc/client_identity.h"
#include "sightline/ipc/codec.h"

namespace sightline::ipc {
namespace {

std::vector<std::uint8_t> Bytes(const EnvelopeT& e) {
  flatbuffers::FlatBufferBuilder b;
  b.Finish(Envelope::Pack(b, &e));
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

template <typename T>
EnvelopeT Wrap(T body) {
  EnvelopeT e;
  e.body.Set(std::move(body));
  return e;
}

std::vector<EnvelopeT> Samples() {
  std::vector<EnvelopeT> out;
  AddRequestT r;
  r.request_id = "cmpl-42-0";
  r.prompt_token_ids = {1, 15043, 29892, 3186};
  r.sampling = std::make_unique<SamplingParamsT>();
  r.sampling->temperature = 0.7f;
  r.sampling->top_k = 40;
  r.sampling->seed = 1234;
  r.sampling->has_seed = true;
  r.sampling->max_tokens = 64;
  r.sampling->max_tokens_set = true;
  r.sampling->stop_token_ids = {2, 13};
  r.arrival_time = 1.7e9;
  r.client_index = 3;
  r.priority = -1;
  r.cache_salt = "tenant-a";
  r.incarnation = 0x0123456789abcdefull;
  out.push_back(Wrap(std::move(r)));

  AbortRequestsT a;
  a.request_ids = {"a", "b"};
  out.push_back(Wrap(std::move(a)));

  UtilityCallT u;
  u.call_id = 9;
  u.kind = UtilityKind::ResetPrefixCache;
  u.client_index = 1;
  u.incarnation = 77;
  out.push_back(Wrap(std::move(u)));

  EngineOutputsT o;
  o.timestamp = 1234.5;
  auto first = std::make_unique<RequestOutputT>();
  first->request_id = "cmpl-42-0";
  first->new_token_ids = {306};
  auto ev = std::make_unique<RequestEventT>();
  ev->type = EventType::Scheduled;
  ev->timestamp = 1234.4;
  first->events.push_back(std::move(ev));
  first->prefill_stats = std::make_unique<PrefillStatsT>();
  first->prefill_stats->num_prompt_tokens = 4;
  auto last = std::make_unique<RequestOutputT>();
  last->request_id = "cmpl-7-0";
  last->new_token_ids = {2};
  last->finish_reason = FinishReason::Stop;
  last->stop_token = 2;
  o.outputs.push_back(std::move(first));
  o.outputs.push_back(std::move(last));
  o.utility_result = std::make_unique<UtilityResultT>();
  o.utility_result->call_id = 9;
  o.utility_result->ok = true;
  out.push_back(Wrap(std::move(o)));

  EngineReadyT ready;
  ready.model_name = "sightline-tiny";
  ready.max_model_len = 2048;
  ready.block_size = 16;
  ready.num_gpu_blocks = 512;
  ready.kv_cache_size_tokens = 8192;
  ready.vocab_size = 259;
  ready.eos_token_ids = {257};
  out.push_back(Wrap(std::move(ready)));

  EngineDeadT dead;
  dead.reason = "model execution failed";
  out.push_back(Wrap(std::move(dead)));

  HeartbeatT beat;
  beat.client_index = 2;
  beat.incarnation = ~0ull;
  out.push_back(Wrap(std::move(beat)));
  return out;
}

TEST(Messages, EveryKindRoundTrips) {
  for (const EnvelopeT& sample : Samples()) {
    const auto bytes = Bytes(sample);
    const Envelope* e = Decode(bytes);
    ASSERT_NE(e, nullptr) << EnumNameBody(sample.body.type);
    EnvelopeT back;
    e->UnPackTo(&back);
    EXPECT_TRUE(back == sample) << EnumNameBody(sample.body.type);
  }
}

TEST(Messages, SealWrapsABody) {
  flatbuffers::FlatBufferBuilder b;
  const auto ids = b.CreateVectorOfStrings({"x"});
  const auto bytes = Seal(b, Body::AbortRequests, CreateAbortRequests(b, ids).Union());
  const Envelope* e = Decode(bytes);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->body_as_AbortRequests()->request_ids()->Get(0)->str(), "x");
}

TEST(Messages, MissingRequiredFieldsAndEmptyBodiesAreRejected) {
  flatbuffers::FlatBufferBuilder b;
  const auto bytes = Seal(b, Body::AddRequest, CreateAddRequest(b).Union());  // no id, no prompt
  EXPECT_EQ(Decode(bytes), nullptr);
  flatbuffers::FlatBufferBuilder b2;
  b2.Finish(CreateEnvelope(b2));
  EXPECT_EQ(Decode({b2.GetBufferPointer(), b2.GetSize()}), nullptr);
  EXPECT_EQ(Decode({}), nullptr);
  // A union type with no table behind it (the fuzzer's first find).
  const std::vector<std::uint8_t> typed_but_empty = {12, 0, 0, 0, 12, 0, 0, 0, 0, 0, 9, 9, 12, 0,
                                                     0,  0, 0, 0, 9,  0, 8, 0, 0, 9, 7, 0, 0};
  EXPECT_EQ(Decode(typed_but_empty), nullptr);
}

TEST(Messages, TruncatedCorruptAndRandomBuffersNeverGetThrough) {
  std::mt19937 rng(20261129);
  int rejected = 0, accepted = 0;
  for (const EnvelopeT& sample : Samples()) {
    const auto good = Bytes(sample);
    // Cut into the data (only trailing alignment padding may go).
    for (std::size_t len = 0; len + 8 < good.size(); ++len)
      EXPECT_EQ(Decode(std::span(good).first(len)), nullptr)
          << EnumNameBody(sample.body.type) << " cut to " << len;
    for (int i = 0; i < 3000; ++i) {
      std::vector<std::uint8_t> bad = good;
      for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips)
        bad[rng() % bad.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      if (const Envelope* e = Decode(bad)) {
        ++accepted;
        ReadAll(e);  // whatever passed must be safe to read in full
      } else {
        ++rejected;
      }
    }
  }
  for (int i = 0; i < 5000; ++i) {
    std::vector<std::uint8_t> noise(1 + rng() % 256);
    for (auto& byte : noise) byte = static_cast<std::uint8_t>(rng());
    if (const Envelope* e = Decode(noise)) ReadAll(e);
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(accepted, 0);  // benign flips (e.g. in a token id) are fine and must read safely
}

// The identity is chosen by the peer: only the exact form is accepted.
TEST(ClientIdentity, RoundTripsAndRefusesAnythingElse) {
  for (const ClientId id : {ClientId{0, 0}, ClientId{3, 0x5eed}, ClientId{4294967295u, ~0ull}}) {
    const std::string s = FormatClientIdentity(id);
    ASSERT_EQ(ParseClientIdentity(s), id) << s;
  }
  EXPECT_EQ(FormatClientIdentity({12, 0xabc}), "c12.abc");
  for (const char* bad :
       {"", "c", "c0", "c0.", "c.1", "x0.1", "c0.1.", "c0.01", "c00.1", "c0.ABC", "c0.+1", "c-1.1",
        "c0.0x1", "c4294967296.1", "c0.10000000000000000", "c0 .1", "c0.1\n"})
    EXPECT_EQ(ParseClientIdentity(bad), std::nullopt) << bad;
  EXPECT_EQ(ParseClientIdentity(std::string_view("c0.1\0", 5)), std::nullopt);
}

}  // namespace
}  // namespace sightline::ipc
