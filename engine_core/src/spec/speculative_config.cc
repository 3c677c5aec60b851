#include "spec/speculative_config.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "flags/json_flag.h"

namespace sightline::engine {

namespace {

Status Invalid(const std::string& what) {
  return Status::InvalidArgument("--speculative-config: " + what);
}

// An integer field: absent or null leaves *out alone; anything but a JSON
// integer (a float, a bool, a string) is an error naming the key.
Status ReadInt(const nlohmann::json& j, const char* key, bool* present, int* out) {
  *present = false;
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number_integer()) return Invalid(std::string(key) + " must be an integer");
  const auto v = it->get<std::int64_t>();
  if (v < -1'000'000 || v > 1'000'000) return Invalid(std::string(key) + " is out of range");
  *out = static_cast<int>(v);
  *present = true;
  return Status::Ok();
}

}  // namespace

Status ParseSpeculativeConfig(std::string_view text, SpeculativeConfig* out) {
  *out = SpeculativeConfig{};
  if (text.empty()) return Status::Ok();
  nlohmann::json j;
  if (Status s = ParseJsonFlag(
          text, "--speculative-config",
          {"method", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max"}, &j);
      !s.ok())
    return s;
  const auto method = j.find("method");
  if (method == j.end() || !method->is_string())
    return Invalid("\"method\" is required: only \"ngram\" is supported");
  if (*method != "ngram" && *method != "[ngram]")
    return Invalid("method \"" + method->get<std::string>() +
                   "\" is not supported: only \"ngram\" (no draft models here)");
  SpeculativeConfig c;
  bool has_k = false, has_min = false, has_max = false;
  if (Status s = ReadInt(j, "num_speculative_tokens", &has_k, &c.num_speculative_tokens); !s.ok())
    return s;
  if (Status s = ReadInt(j, "prompt_lookup_min", &has_min, &c.prompt_lookup_min); !s.ok()) return s;
  if (Status s = ReadInt(j, "prompt_lookup_max", &has_max, &c.prompt_lookup_max); !s.ok()) return s;
  if (!has_k) return Invalid("num_speculative_tokens is required with method ngram");
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > kMaxSpeculativeTokens)
    return Invalid("num_speculative_tokens must be in [1, " +
                   std::to_string(kMaxSpeculativeTokens) + "]");
  // vLLM's defaults: each bound defaults to the other, both to 5.
  if (!has_min && !has_max) c.prompt_lookup_min = c.prompt_lookup_max = 5;
  if (!has_min && has_max) c.prompt_lookup_min = c.prompt_lookup_max;
  if (has_min && !has_max) c.prompt_lookup_max = c.prompt_lookup_min;
  if (c.prompt_lookup_min < 1) return Invalid("prompt_lookup_min must be at least 1");
  if (c.prompt_lookup_max < 1) return Invalid("prompt_lookup_max must be at least 1");
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    return Invalid("prompt_lookup_min (" + std::to_string(c.prompt_lookup_min) +
                   ") exceeds prompt_lookup_max (" + std::to_string(c.prompt_lookup_max) + ")");
  *out = c;
  return Status::Ok();
}

}  // namespace sightline::engine
