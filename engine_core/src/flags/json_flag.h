// A flag whose value is one JSON object with a fixed set of keys, as vLLM
// takes --speculative-config and --kv-events-config: parsed once, refused
// with one line that names the flag.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string_view>

#include "sightline/status.h"

namespace sightline::engine {

// `text` as a JSON object whose keys are all among `keys`. Errors (not JSON,
// not an object, a key not in `keys`, listed in their order) read
// "<flag>: ..." (kInvalidArgument).
Status ParseJsonFlag(std::string_view text, std::string_view flag,
                     std::initializer_list<std::string_view> keys, nlohmann::json* out);

}  // namespace sightline::engine
