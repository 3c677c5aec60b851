// Reading a config.json's rope_scaling / rope_parameters object into
// ModelConfig::rope_scaling (and rope_theta), as transformers'
// modeling_rope_utils defines each rope type; part of model_config.cc.
#pragma once

#include <nlohmann/json.hpp>

#include "sightline/engine_core/model_config.h"
#include "sightline/status.h"

namespace sightline::engine {

// `r` is the object under `field` ("rope_scaling" or "rope_parameters"; the
// latter also `carries_theta`). `original_max_position` is Phi-3's top-level
// original_max_position_embeddings (0: none), which longrope reads. Needs
// c->max_position_embeddings, c->head_dim and c->rotary_dim already read. Errors name the key.
Status ReadRope(const nlohmann::json& r, const char* field, bool carries_theta,
                int original_max_position, ModelConfig* c);

}  // namespace sightline::engine
