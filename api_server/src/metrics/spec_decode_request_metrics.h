// RequestSpecDecodeMetrics: one request's speculative-decoding acceptance,
// vLLM's `metrics.speculative_decoding` object
// (--per-request-spec-decode-metrics summary|detailed).
//
// Built from the numbers each of the request's engine outputs carries
// (RequestOutput.num_draft_tokens / num_accepted_draft_tokens): the step that
// output comes from verified that many drafts and kept that many. The
// engine's vllm:spec_decode_* counters count the same numbers, so over the
// requests a server answered they sum to the counters (a step still in
// flight when a stop string ended a response is counted by the engine only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sightline/status.h"

namespace sightline::api {

enum class SpecDecodeMetricsMode { kNone, kSummary, kDetailed };

// "none", "summary" or "detailed"; anything else is an error naming the flag.
Status ParseSpecDecodeMetricsMode(const std::string& text, SpecDecodeMetricsMode* out);

class RequestSpecDecodeMetrics {
 public:
  // `num_spec_tokens`: the engine's K (the histogram has K + 1 entries);
  // `detailed`: also keep each step's numbers.
  RequestSpecDecodeMetrics(std::uint32_t num_spec_tokens, bool detailed);

  // One step that verified `drafted` (> 0) draft tokens and kept `accepted`.
  void Observe(std::uint32_t drafted, std::uint32_t accepted);

  // vLLM's fields: mean_acceptance_length (1 + accepted / steps; 1 without
  // steps), draft_acceptance_rate (accepted / drafted; 0 without drafts),
  // acceptance_histogram ([j]: steps that kept exactly j drafts),
  // num_spec_steps, num_accepted_draft_tokens, num_draft_tokens,
  // num_spec_tokens; when detailed and a step happened, per_step_accepted
  // and per_step_drafted (one entry per step, in order).
  nlohmann::json ToJson() const;

 private:
  std::uint32_t num_spec_tokens_;
  bool detailed_;
  std::vector<std::uint64_t> histogram_;  // steps and accepted tokens follow from it
  std::uint64_t num_draft_tokens_ = 0;
  std::vector<std::uint32_t> per_step_accepted_, per_step_drafted_;
};

}  // namespace sightline::api
