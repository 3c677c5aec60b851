#include "flags/json_flag.h"

#include <algorithm>
#include <string>

namespace sightline::engine {

Status ParseJsonFlag(std::string_view text, std::string_view flag,
                     std::initializer_list<std::string_view> keys, nlohmann::json* out) {
  auto invalid = [&](const std::string& what) {
    return Status::InvalidArgument(std::string(flag) + ": " + what);
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid("not valid JSON");
  if (!j.is_object()) return invalid("must be a JSON object");
  for (const auto& [key, value] : j.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      std::string known;
      for (std::string_view k : keys) known += (known.empty() ? "" : ", ") + std::string(k);
      return invalid("unknown key \"" + key + "\" (" + known + ")");
    }
  *out = std::move(j);
  return Status::Ok();
}

}  // namespace sightline::engine
