#include "metrics/spec_decode_request_metrics.h"

namespace sightline::api {

Status ParseSpecDecodeMetricsMode(const std::string& text, SpecDecodeMetricsMode* out) {
  if (text == "none") {
    *out = SpecDecodeMetricsMode::kNone;
  } else if (text == "summary") {
    *out = SpecDecodeMetricsMode::kSummary;
  } else if (text == "detailed") {
    *out = SpecDecodeMetricsMode::kDetailed;
  } else {
    return Status::InvalidArgument(
        "--per-request-spec-decode-metrics must be none, summary or "
        "detailed, not '" +
        text + "'");
  }
  return Status::Ok();
}

RequestSpecDecodeMetrics::RequestSpecDecodeMetrics(std::uint32_t num_spec_tokens, bool detailed)
    : num_spec_tokens_(num_spec_tokens), detailed_(detailed), histogram_(num_spec_tokens + 1, 0) {}

void RequestSpecDecodeMetrics::Observe(std::uint32_t drafted, std::uint32_t accepted) {
  // The engine never keeps more than it drafted nor drafts more than K; were
  // it to, the histogram grows rather than lose a step.
  if (accepted >= histogram_.size()) histogram_.resize(accepted + 1, 0);
  ++histogram_[accepted];
  num_draft_tokens_ += drafted;
  if (detailed_) {
    per_step_accepted_.push_back(accepted);
    per_step_drafted_.push_back(drafted);
  }
}

nlohmann::json RequestSpecDecodeMetrics::ToJson() const {
  std::uint64_t num_spec_steps = 0, num_accepted = 0;  // as vLLM derives them
  for (std::size_t j = 0; j < histogram_.size(); ++j) {
    num_spec_steps += histogram_[j];
    num_accepted += j * histogram_[j];
  }
  const double steps = static_cast<double>(num_spec_steps);
  const double accepted = static_cast<double>(num_accepted);
  nlohmann::json m = {{"mean_acceptance_length", num_spec_steps ? 1.0 + accepted / steps : 1.0},
                      {"draft_acceptance_rate",
                       num_draft_tokens_ ? accepted / static_cast<double>(num_draft_tokens_) : 0.0},
                      {"acceptance_histogram", histogram_},
                      {"num_spec_steps", num_spec_steps},
                      {"num_accepted_draft_tokens", num_accepted},
                      {"num_draft_tokens", num_draft_tokens_},
                      {"num_spec_tokens", num_spec_tokens_}};
  // As vLLM: the arrays only when there is a step to show.
  if (detailed_ && !per_step_accepted_.empty()) {
    m["per_step_accepted"] = per_step_accepted_;
    m["per_step_drafted"] = per_step_drafted_;
  }
  return m;
}

}  // namespace sightline::api
