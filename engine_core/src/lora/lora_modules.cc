#include "lora/lora_modules.h"

#include <nlohmann/json.hpp>

namespace sightline::engine {

Status ParseLoraModule(const std::string& arg, LoraModuleSpec* out) {
  const std::string where = "--lora-modules '" + arg + "'";
  LoraModuleSpec m;
  if (!arg.empty() && arg.front() == '{') {
    const nlohmann::json j = nlohmann::json::parse(arg, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      return Status::InvalidArgument(where + ": not a JSON object");
    for (const auto& [key, value] : j.items()) {
      if (key != "name" && key != "path" && key != "base_model_name")
        return Status::InvalidArgument(where + ": unknown key '" + key + "'");
      if (!value.is_string() && !(key == "base_model_name" && value.is_null()))
        return Status::InvalidArgument(where + ": '" + key + "' must be a string");
    }
    m.name = j.value("name", "");
    m.path = j.value("path", "");
    if (j.contains("base_model_name") && j["base_model_name"].is_string())
      m.base_model_name = j["base_model_name"];
  } else {
    const std::size_t eq = arg.find('=');
    if (eq == std::string::npos)
      return Status::InvalidArgument(where + ": expected name=path or a JSON object");
    m.name = arg.substr(0, eq);
    m.path = arg.substr(eq + 1);
  }
  if (m.name.empty() || m.path.empty())
    return Status::InvalidArgument(where + ": needs a name and a path");
  *out = std::move(m);
  return Status::Ok();
}

}  // namespace sightline::engine
