// --lora-modules: the adapters an engine serves from its start, as vLLM
// spells them: "name=path", or JSON {"name": ..., "path": ...,
// "base_model_name": ...}.
#pragma once

#include <string>

#include "sightline/status.h"

namespace sightline::engine {

struct LoraModuleSpec {
  std::string name, path, base_model_name;
};

// One --lora-modules value; errors name the flag and the value.
Status ParseLoraModule(const std::string& arg, LoraModuleSpec* out);

}  // namespace sightline::engine
