#include "sightline/loadgen/spec_decode.h"

#include <algorithm>
#include <string>

namespace sightline::loadgen {

namespace {

bool Has(const std::vector<Sample>& samples, const std::string& name) {
  return std::any_of(samples.begin(), samples.end(),
                     [&](const Sample& s) { return s.name == name; });
}

}  // namespace

std::optional<SpecDecodeStats> SpecDecodeDelta(const std::vector<Sample>& before,
                                               const std::vector<Sample>& after) {
  for (const char* name : {kSpecDrafts, kSpecDraftTokens, kSpecAcceptedTokens})
    if (!Has(after, name)) return std::nullopt;
  SpecDecodeStats s;
  s.drafts = Sum(after, kSpecDrafts) - Sum(before, kSpecDrafts);
  s.draft_tokens = Sum(after, kSpecDraftTokens) - Sum(before, kSpecDraftTokens);
  s.accepted_tokens = Sum(after, kSpecAcceptedTokens) - Sum(before, kSpecAcceptedTokens);
  if (s.drafts < 0 || s.draft_tokens < 0 || s.accepted_tokens < 0) return std::nullopt;
  if (s.draft_tokens > 0) s.acceptance_rate = s.accepted_tokens / s.draft_tokens;
  if (s.drafts > 0) s.mean_acceptance_length = 1 + s.accepted_tokens / s.drafts;
  return s;
}

}  // namespace sightline::loadgen
