#include "spec/drafts.h"

#include <algorithm>
#include <cassert>

#include "spec/ngram_proposer.h"

namespace sightline::engine {

void ProposeDrafts(std::span<Request* const> running, const SpeculativeConfig& config,
                   int max_model_len) {
  for (Request* r : running) {
    r->draft_tokens.clear();
    // A decode computes every known token but the newest.
    if (r->num_computed_tokens != r->num_tokens() - 1) continue;
    const int room =
        std::min({config.num_speculative_tokens,
                  static_cast<int>(r->sampling.max_tokens) - r->num_output_tokens() - 1,
                  max_model_len - 1 - r->num_tokens()});
    r->draft_tokens = ProposeNgramDrafts(r->tokens, config, room);
  }
}

int AcceptedDrafts(std::span<const std::int32_t> drafts, std::span<const std::int32_t> sampled) {
  assert(sampled.size() == drafts.size() + 1);
  std::size_t accepted = 0;
  while (accepted < drafts.size() && sampled[accepted] == drafts[accepted]) ++accepted;
  return static_cast<int>(accepted);
}

}  // namespace sightline::engine
