// --collect-detailed-traces (vLLM's flag): which of the engine's per-request
// timings a request's span carries, besides its time in the scheduler.
// "model": the model forward pass (gen_ai.latency.time_in_model_forward,
// vllm:model_forward_time_milliseconds); "worker": the model execute call,
// forward and sampling (time_in_model_execute,
// vllm:model_execute_time_milliseconds); "all": both. Values may be
// combined with commas, as vLLM's ("model,worker").
#pragma once

#include <string_view>

#include "sightline/status.h"

namespace sightline::tracing {

struct DetailedTraces {
  bool model = false, worker = false;
  bool any() const { return model || worker; }
};

// "" is none. InvalidArgument names the value that is not one of the three.
Status ParseDetailedTraces(std::string_view value, DetailedTraces* out);

}  // namespace sightline::tracing
