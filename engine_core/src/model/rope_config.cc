#include "model/rope_config.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace sightline::engine {

namespace {

using nlohmann::json;

Status Bad(const std::string& why) {
  return Status::InvalidArgument("model config: " + why);
}

// The rope types this build computes, and the keys each takes (besides
// type/rope_type and, in rope_parameters, rope_theta): required first, then
// optional. transformers' modeling_rope_utils names them; anything else
// (mscale, attention_factor, ...) is refused.
struct RopeKind {
  std::string_view name;
  kernels::cpu::RopeType type;
  std::vector<std::string_view> required, optional;
};
const std::vector<RopeKind>& RopeKinds() {
  using kernels::cpu::RopeType;
  static const std::vector<RopeKind> kinds = {
      {"default", RopeType::kDefault, {}, {}},
      {"llama3",
       RopeType::kLlama3,
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
       {}},
      {"linear", RopeType::kLinear, {"factor"}, {}},
      {"dynamic", RopeType::kDynamic, {"factor"}, {}},
      {"yarn",
       RopeType::kYarn,
       {"factor"},
       {"original_max_position_embeddings", "beta_fast", "beta_slow"}},
      // Phi-3's; "su" is its first name (transformers maps it to longrope).
      {"longrope", RopeType::kLongrope, {"short_factor", "long_factor"}, {}},
      {"su", RopeType::kLongrope, {"short_factor", "long_factor"}, {}},
  };
  return kinds;
}

}  // namespace

Status ReadRope(const json& r, const char* field, bool carries_theta, int original_max_position,
                ModelConfig* c) {
  if (!r.is_object()) return Bad(std::string("'") + field + "' must be an object or null");
  const std::string f = field;
  std::string type = "default";
  for (const char* k : {"type", "rope_type"}) {  // rope_type wins: transformers' order
    if (!r.contains(k)) continue;
    if (!r[k].is_string()) return Bad("'" + f + "." + k + "' must be a string");
    type = r[k].get<std::string>();
  }
  const RopeKind* kind = nullptr;
  std::string names;
  for (const RopeKind& k : RopeKinds()) {
    if (k.name == type) kind = &k;
    names += (names.empty() ? "" : ", ") + std::string(k.name);
  }
  if (!kind)
    return Bad("unsupported rope type '" + type + "' in '" + f + "' (supported: " + names + ")");
  auto takes = [&](const std::string& k) {
    return std::find(kind->required.begin(), kind->required.end(), k) != kind->required.end() ||
           std::find(kind->optional.begin(), kind->optional.end(), k) != kind->optional.end();
  };
  for (const auto& [k, v] : r.items()) {
    const bool common = k == "rope_type" || k == "type" || (carries_theta && k == "rope_theta");
    if (!common && !takes(k))
      return Bad("'" + f + "." + k + "' is not supported for rope type '" + type + "'");
    const bool factors = k == "short_factor" || k == "long_factor";
    if (factors) {
      if (!v.is_array() || v.size() != static_cast<std::size_t>(c->RotaryDim() / 2) ||
          !std::all_of(v.begin(), v.end(),
                       [](const json& x) { return x.is_number() && x.get<double>() > 0; }))
        return Bad("'" + f + "." + k + "' must list the rotary dimension / 2 = " +
                   std::to_string(c->RotaryDim() / 2) + " positive numbers");
    } else if (k != "rope_type" && k != "type" && !v.is_number()) {
      return Bad("'" + f + "." + k + "' must be a number");
    }
  }
  for (std::string_view k : kind->required)
    if (!r.contains(k))
      return Bad("'" + f + "' of type " + type + " needs '" + std::string(k) + "'");
  if (carries_theta && r.contains("rope_theta")) c->rope_theta = r["rope_theta"].get<float>();
  kernels::cpu::RopeScaling& s = c->rope_scaling;
  s = kernels::cpu::RopeScaling{};
  s.type = kind->type;
  if (kind->type == kernels::cpu::RopeType::kDefault) return Status::Ok();
  if (kind->type == kernels::cpu::RopeType::kLongrope) {
    // transformers: the context stretches from original_max_position_embeddings
    // (when the config has it) to max_position_embeddings, and cos/sin are
    // scaled by sqrt(1 + ln(factor) / ln(original)).
    s.original_max_position =
        original_max_position > 0 ? original_max_position : c->max_position_embeddings;
    s.factor = static_cast<float>(c->max_position_embeddings) /
               static_cast<float>(s.original_max_position);
    s.short_factor = r["short_factor"].get<std::vector<float>>();
    s.long_factor = r["long_factor"].get<std::vector<float>>();
    s.attention_factor =
        s.factor <= 1 ? 1.0f
                      : static_cast<float>(std::sqrt(1 + std::log(static_cast<double>(s.factor)) /
                                                             std::log(s.original_max_position)));
    return Status::Ok();
  }
  s.factor = r["factor"].get<float>();
  if (!(s.factor >= 1) || !std::isfinite(s.factor)) return Bad("'" + f + ".factor' must be >= 1");
  // The context the scaling stretches: llama3 and yarn name it, dynamic
  // stretches the model's own (vLLM passes max_position_embeddings).
  s.original_max_position = r.value("original_max_position_embeddings", c->max_position_embeddings);
  if (s.original_max_position <= 0)
    return Bad("'" + f + ".original_max_position_embeddings' must be positive");
  if (kind->type == kernels::cpu::RopeType::kLlama3) {
    s.low_freq_factor = r["low_freq_factor"].get<float>();
    s.high_freq_factor = r["high_freq_factor"].get<float>();
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0))
      return Bad("'" + f + "': llama3 needs high_freq_factor > low_freq_factor > 0");
  }
  if (kind->type == kernels::cpu::RopeType::kYarn) {
    s.beta_fast = r.value("beta_fast", 32.0f);
    s.beta_slow = r.value("beta_slow", 1.0f);
    if (!(s.beta_fast > s.beta_slow) || !(s.beta_slow > 0))
      return Bad("'" + f + "': yarn needs beta_fast > beta_slow > 0");
    s.attention_factor = static_cast<float>(0.1 * std::log(static_cast<double>(s.factor)) + 1.0);
  }
  return Status::Ok();
}

}  // namespace sightline::engine
