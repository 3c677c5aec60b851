// Engine requests for tests: a greedy AddRequest envelope that ignores EOS,
// so it produces exactly `max_tokens` tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sightline/ipc/codec.h"
#include "sightline/ipc/sampling.h"

namespace sightline::testing {

inline std::vector<std::uint8_t> GreedyAddRequest(const std::string& id,
                                                  const std::vector<std::int32_t>& prompt,
                                                  std::uint32_t max_tokens,
                                                  std::uint32_t client_index,
                                                  std::uint64_t incarnation = 0) {
  flatbuffers::FlatBufferBuilder b;
  const auto id_off = b.CreateString(id);
  const auto prompt_off = b.CreateVector(prompt);
  ipc::SamplingParamsT sampling;
  sampling.temperature = 0;
  sampling.max_tokens = max_tokens;
  sampling.ignore_eos = true;
  const auto sampling_off = ipc::ToWire(b, sampling);
  ipc::AddRequestBuilder r(b);
  r.add_request_id(id_off);
  r.add_prompt_token_ids(prompt_off);
  r.add_sampling(sampling_off);
  r.add_client_index(client_index);
  r.add_incarnation(incarnation);
  const auto bytes = ipc::Seal(b, ipc::Body::AddRequest, r.Finish().Union());
  return {bytes.begin(), bytes.end()};
}

}  // namespace sightline::testing
