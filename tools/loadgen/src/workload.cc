#include "sightline/loadgen/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <utility>

namespace sightline::loadgen {

namespace {

// Prompt token ids come from [32, 127): printable ASCII for the built-in byte
// tokenizer, ordinary tokens in any real vocabulary.
constexpr std::uint32_t kLowId = 32, kHighId = 127;

std::uint32_t Around(std::mt19937_64& rng, std::uint32_t len, double ratio) {
  const double lo = std::max(1.0, std::floor(len * (1 - ratio)));
  const double hi = std::max(lo, std::ceil(len * (1 + ratio)));
  return static_cast<std::uint32_t>(std::uniform_int_distribution<std::uint64_t>(
      static_cast<std::uint64_t>(lo), static_cast<std::uint64_t>(hi))(rng));
}

std::vector<std::uint32_t> RandomIds(std::mt19937_64& rng, std::uint32_t n) {
  std::uniform_int_distribution<std::uint32_t> id(kLowId, kHighId - 1);
  std::vector<std::uint32_t> ids(n);
  for (auto& t : ids) t = id(rng);
  return ids;
}

// Text of about n tokens for byte-level tokenizers: lowercase words.
std::string RandomText(std::mt19937_64& rng, std::uint32_t n) {
  std::uniform_int_distribution<int> letter('a', 'z'), word(2, 8);
  std::string s;
  while (s.size() < n) {
    if (!s.empty()) s += ' ';
    for (int i = word(rng); i > 0 && s.size() < n; --i) s += static_cast<char>(letter(rng));
  }
  return s;
}

std::string AsText(const std::vector<std::uint32_t>& ids) {
  std::string s;
  for (auto t : ids) s += static_cast<char>(t);
  return s;
}

}  // namespace

std::vector<BenchRequest> RandomWorkload(const RandomOptions& o, std::size_t num_prompts) {
  std::mt19937_64 rng(o.seed);
  std::vector<BenchRequest> out(num_prompts);
  for (BenchRequest& r : out) {
    const std::uint32_t in = Around(rng, o.input_len, o.range_ratio);
    if (o.text)
      r.prompt_text = RandomText(rng, in);
    else
      r.prompt_ids = RandomIds(rng, in);
    r.max_tokens = Around(rng, o.output_len, o.range_ratio);
  }
  return out;
}

std::vector<BenchRequest> SharedPrefixWorkload(const SharedPrefixOptions& o,
                                               std::size_t num_prompts) {
  std::mt19937_64 rng(o.seed);
  std::vector<BenchRequest> out(num_prompts);
  std::vector<std::uint32_t> prefix;
  const std::uint32_t k = std::max<std::uint32_t>(1, o.prompts_per_prefix);
  for (std::size_t i = 0; i < num_prompts; ++i) {
    if (i % k == 0) prefix = RandomIds(rng, o.prefix_len);  // a new group
    std::vector<std::uint32_t> ids = prefix;
    const auto suffix = RandomIds(rng, o.suffix_len);
    ids.insert(ids.end(), suffix.begin(), suffix.end());
    if (o.text)
      out[i].prompt_text = AsText(ids);
    else
      out[i].prompt_ids = std::move(ids);
    out[i].max_tokens = o.output_len;
  }
  if (o.interleave) std::shuffle(out.begin(), out.end(), rng);
  return out;
}

Status CheckCopyOptions(const CopyOptions& o) {
  for (const auto& [flag, value] :
       {std::pair{"--copy-span-len", o.span_len}, std::pair{"--copy-repeats", o.repeats},
        std::pair{"--copy-output-len", o.output_len}})
    if (value < 1) return Status::InvalidArgument(std::string(flag) + " must be at least 1");
  if (std::uint64_t{o.span_len} * o.repeats > kMaxCopyPromptTokens)
    return Status::InvalidArgument("--copy-span-len x --copy-repeats must be at most " +
                                   std::to_string(kMaxCopyPromptTokens) + " tokens");
  return Status::Ok();
}

std::vector<BenchRequest> CopyWorkload(const CopyOptions& o, std::size_t num_prompts) {
  std::mt19937_64 rng(o.seed);
  std::vector<BenchRequest> out(num_prompts);
  for (BenchRequest& r : out) {
    const auto span = RandomIds(rng, o.span_len);
    std::vector<std::uint32_t> ids;
    ids.reserve(std::size_t{o.span_len} * o.repeats);
    for (std::uint32_t i = 0; i < o.repeats; ++i) ids.insert(ids.end(), span.begin(), span.end());
    // As shared-prefix does: the text is the ids' bytes, so the repetition
    // is exact under the byte tokenizer and the two endpoints get one prompt.
    if (o.text)
      r.prompt_text = AsText(ids);
    else
      r.prompt_ids = std::move(ids);
    r.max_tokens = o.output_len;
  }
  return out;
}

Status LoadShareGpt(const std::string& path, std::size_t num_prompts, std::uint32_t output_len,
                    std::uint64_t seed, std::vector<BenchRequest>* out) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read dataset " + path);
  nlohmann::json data = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded()) return Status::InvalidArgument("dataset " + path + " is not JSON");
  if (!data.is_array())
    return Status::InvalidArgument("dataset " + path +
                                   ": expected a JSON array of {\"conversations\": [...]}");
  std::vector<BenchRequest> usable;
  for (const auto& entry : data) {
    if (!entry.is_object() || !entry.contains("conversations") ||
        !entry["conversations"].is_array())
      continue;
    const auto& turns = entry["conversations"];
    for (std::size_t i = 0; i + 1 < turns.size(); ++i) {
      const auto& q = turns[i];
      const auto& a = turns[i + 1];
      if (!q.is_object() || !a.is_object() || q.value("from", "") != "human" ||
          a.value("from", "") != "gpt" || !q["value"].is_string() || !a["value"].is_string())
        continue;
      BenchRequest r;
      r.prompt_text = q["value"].get<std::string>();
      if (r.prompt_text.empty()) break;
      const std::size_t reply = a["value"].get<std::string>().size();
      r.max_tokens = output_len
                         ? output_len
                         : static_cast<std::uint32_t>(std::clamp<std::size_t>(reply / 4, 1, 2048));
      usable.push_back(std::move(r));
      break;
    }
  }
  if (usable.empty())
    return Status::InvalidArgument("dataset " + path +
                                   " has no conversation with a human turn followed by a gpt turn");
  std::mt19937_64 rng(seed);
  std::shuffle(usable.begin(), usable.end(), rng);
  if (usable.size() > num_prompts) usable.resize(num_prompts);
  *out = std::move(usable);
  return Status::Ok();
}

std::vector<double> ArrivalTimes(std::size_t n, double rate, std::uint64_t seed) {
  std::vector<double> t(n, 0.0);
  if (!(rate > 0) || std::isinf(rate)) return t;
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  double now = 0;
  for (double& x : t) {
    x = now;
    now += gap(rng);
  }
  return t;
}

}  // namespace sightline::loadgen
