// Workloads for `sightline bench serve`: what to send and when.
//
//  * random: input and output lengths drawn around the given lengths
//    (uniform in [len * (1 - ratio), len * (1 + ratio)]), seeded;
//  * shared-prefix: groups of K prompts that share a prefix of L tokens, to
//    exercise prefix caching;
//  * copy: a random span of S tokens repeated R times, so the output can be
//    drafted from the prompt (speculative decoding by prompt lookup, as in
//    code edits or answers that quote the context);
//  * sharegpt: the first human turn of each conversation of a ShareGPT-format
//    JSON file, with the reply's length as the output length.
// Prompts go to /v1/completions as token ids (the input length is exact,
// whatever the tokenizer) and to /v1/chat/completions as text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sightline/status.h"

namespace sightline::loadgen {

struct BenchRequest {
  std::vector<std::uint32_t> prompt_ids;  // completions
  std::string prompt_text;                // chat (and ShareGPT)
  std::uint32_t max_tokens = 0;
};

struct RandomOptions {
  std::uint32_t input_len = 128, output_len = 128;
  double range_ratio = 0;  // in [0, 1)
  std::uint64_t seed = 0;
  bool text = false;  // prompts as text (chat) rather than token ids
};
std::vector<BenchRequest> RandomWorkload(const RandomOptions& o, std::size_t num_prompts);

struct SharedPrefixOptions {
  std::uint32_t prefix_len = 256;        // L: tokens every prompt of a group starts with
  std::uint32_t prompts_per_prefix = 8;  // K
  std::uint32_t suffix_len = 32, output_len = 64;
  std::uint64_t seed = 0;
  bool text = false;
  // The prompts in a random order (from the seed) rather than group by group:
  // many users of several system prompts at once.
  bool interleave = false;
};
std::vector<BenchRequest> SharedPrefixWorkload(const SharedPrefixOptions& o,
                                               std::size_t num_prompts);

struct CopyOptions {
  std::uint32_t span_len = 64;  // S: tokens in the span
  std::uint32_t repeats = 4;    // R: copies of it in the prompt (1: nothing to copy, a baseline)
  std::uint32_t output_len = 128;
  std::uint64_t seed = 0;
  bool text = false;
};

// S * R at most: the product is what the server gets, and unchecked it
// could wrap or exhaust memory before any request is sent.
inline constexpr std::uint64_t kMaxCopyPromptTokens = 1'000'000;

// Lengths of at least 1 and S * R <= kMaxCopyPromptTokens. The messages
// name `sightline bench serve`'s flags, the only caller's.
Status CheckCopyOptions(const CopyOptions& o);

// Each prompt is its own span (no prefix is shared between prompts, so
// prefix caching does not blur the measurement), repeated back to back: the
// prompt ends where the span does, so its continuation is the span's start.
// `o` must pass CheckCopyOptions.
std::vector<BenchRequest> CopyWorkload(const CopyOptions& o, std::size_t num_prompts);

// A ShareGPT file: a JSON array of {"conversations": [{"from": "human",
// "value": ...}, {"from": "gpt", "value": ...}, ...]}. The output length is
// `output_len` if non-zero, else the reply's bytes / 4 (a rough token count;
// the file carries no token ids) clamped to [1, 2048]. Takes the first
// `num_prompts` usable conversations (in file order after a seeded shuffle).
Status LoadShareGpt(const std::string& path, std::size_t num_prompts, std::uint32_t output_len,
                    std::uint64_t seed, std::vector<BenchRequest>* out);

// Arrival offsets in seconds from the start: a Poisson process of `rate`
// requests/s (exponential gaps, seeded), or all at 0 when rate is infinite.
std::vector<double> ArrivalTimes(std::size_t n, double rate, std::uint64_t seed);

}  // namespace sightline::loadgen
